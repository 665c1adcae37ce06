"""An exported doctune encoder as an MLflow pyfunc model ("models from code": MLflow copies this file
into the logged model). ``predict`` takes texts (a list, a Series or a one-column DataFrame) and
returns their L2-normalised embeddings, shape (len(texts), d), as sentence-transformers computes
them from the exported directory (``best/``), which equals doctune's own embeddings to 1e-5
(tests/platform/test_export.py). It imports only MLflow and sentence-transformers, so the model
loads where doctune is not installed; ``trust_remote_code`` admits the exported Longformer's module
that gives [CLS] global attention (``platform/export/modeling_doctune.py``).
"""

# No ``from __future__ import annotations``: MLflow reads predict's type hints at run time (its input
# is validated and converted to a list of strings, and the model's signature inferred from them).
import mlflow
from mlflow.pyfunc import PythonModel


class DoctuneEncoder(PythonModel):
    def load_context(self, context) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(context.artifacts["encoder"], trust_remote_code=True)

    def predict(self, context, model_input: list[str], params=None):
        return self.model.encode(model_input, convert_to_numpy=True)


mlflow.models.set_model(DoctuneEncoder())
