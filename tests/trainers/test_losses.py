from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainers.distributed import gather, world_size
from trainers.losses import anchor_loss, deca_nt_xent, info_nce, mask_tokens, masked_lm_loss, nt_xent
from trainers.settings import TrialSettings
from trainers.training_loss import LossHeads, training_loss

# --- one batch worked by hand, for every recipe's loss -------------------------------------------
#
# Two pairs in the plane: view A rows h1 = (1, 0), h2 = (0, 1); view B rows g1 = (1, 0), g2 = (1, 1).
# The cosines cos(h_i, g_k) are 1 and c for h1 (c = 1/sqrt2), 0 and c for h2; h1.h2 = 0, g1.g2 = c.
# With tau = 1/2 every logit is twice its cosine.
C = 1 / math.sqrt(2)
VIEW_A = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
VIEW_B = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
TAU = 0.5
E2, E2C = math.exp(2), math.exp(2 * C)  # e^(1/tau), e^(c/tau)
# InfoNCE from view A to view B, the positive in the denominator (SimCSE Eq. 1; SimDE Eq. 1):
#   h1: -2 + log(e^2 + e^2c) = 0.4425;  h2: -2c + log(e^0 + e^2c) = 0.2177
INFONCE_A_TO_B = ((-2 + math.log(E2 + E2C)) + (-2 * C + math.log(1 + E2C))) / 2
# and from view B back to view A:  g1: -2 + log(e^2 + e^0) = 0.1269;  g2: -2c + log(e^2c + e^2c) = log 2
INFONCE_B_TO_A = ((-2 + math.log(E2 + 1)) + math.log(2)) / 2
# DECA Eq. 4: from each document to the copies, the positive out of the denominator, so h1's only
# negative is g2 and h2's is g1:  h1: -2 + 2c;  h2: -2c + 0;  mean -1
DECA_EQ4 = ((-2 + 2 * C) + (-2 * C + 0)) / 2
# SimCLR's 2N form: all four rows are anchors, each against the three others (positive included):
#   h1: -2 + log(e^0 + e^2 + e^2c);  h2: -2c + log(e^0 + e^0 + e^2c);  g1: as h1;  g2: -2c + log(3 e^2c) = log 3
NTXENT_2N = (2 * (-2 + math.log(1 + E2 + E2C)) + (-2 * C + math.log(2 + E2C)) + math.log(3)) / 4


def test_info_nce_matches_the_hand_worked_batch_in_each_direction():
    assert info_nce(VIEW_A, VIEW_B, TAU).item() == pytest.approx(INFONCE_A_TO_B, rel=1e-6)
    expected = (INFONCE_A_TO_B + INFONCE_B_TO_A) / 2
    assert info_nce(VIEW_A, VIEW_B, TAU, symmetric=True).item() == pytest.approx(expected, rel=1e-6)


# One hard negative a pair (trainers.hard_negatives): k1 = (1, 1) for h1's pair, k2 = (1, 0) for h2's,
# each in every anchor's denominator: h1's cosines with (g1, g2, k1, k2) are (1, c, c, 1), h2's (0, c, c, 0):
#   h1: -2 + log(2 e^2 + 2 e^2c);  h2: -2c + log(2 + 2 e^2c)
# and from view B back to view A nothing changes (a hard negative is no one's anchor).
HARD_NEGATIVES = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
INFONCE_A_TO_B_HARD = ((-2 + math.log(2 * E2 + 2 * E2C)) + (-2 * C + math.log(2 + 2 * E2C))) / 2


def test_hard_negatives_join_every_anchor_s_denominator_in_the_hand_worked_batch():
    hard = info_nce(VIEW_A, VIEW_B, TAU, negatives=HARD_NEGATIVES)
    assert hard.item() == pytest.approx(INFONCE_A_TO_B_HARD, rel=1e-6)
    expected = (INFONCE_A_TO_B_HARD + INFONCE_B_TO_A) / 2
    both = info_nce(VIEW_A, VIEW_B, TAU, symmetric=True, negatives=HARD_NEGATIVES)
    assert both.item() == pytest.approx(expected, rel=1e-6)
    hp = TrialSettings(temperature=TAU, mlm_weight=0.0, hard_negatives=1)  # infonce in both directions
    total, terms = training_loss(hp, {"embeddings": torch.cat([VIEW_A, VIEW_B, HARD_NEGATIVES])})
    assert total.item() == pytest.approx(expected, rel=1e-6)
    assert terms["hard_negative_cosine"] == pytest.approx((C + 0.0) / 2, rel=1e-6)  # cos(h1, k1), cos(h2, k2)
    assert terms["negative_cosine"] == pytest.approx((C + 0.0) / 2, rel=1e-6)  # the in-batch ones: unchanged


def test_the_anchor_term_is_twice_one_minus_each_text_s_cosine_to_its_start_and_joins_the_total():
    trained, start = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    # cosines c and 1 (the norms do not count): 2 (1 - c) and 0, their mean 1 - c
    assert anchor_loss(trained, start).item() == pytest.approx(1 - C, rel=1e-6)
    with pytest.raises(ValueError, match="equal shape"):
        anchor_loss(trained, start[:1])
    hp = TrialSettings(temperature=TAU, mlm_weight=0.0, hard_negatives=1, anchor_weight=0.5)
    outputs = {"embeddings": torch.cat([VIEW_A, VIEW_B, HARD_NEGATIVES, trained]), "anchor_targets": start}
    total, terms = training_loss(hp, outputs)  # the anchor texts are the last rows, after the hard negatives
    expected = (INFONCE_A_TO_B_HARD + INFONCE_B_TO_A) / 2 + 0.5 * (1 - C)
    assert total.item() == pytest.approx(expected, rel=1e-6) and terms["loss"] == pytest.approx(expected, rel=1e-6)
    assert terms["anchor_loss"] == pytest.approx(1 - C, rel=1e-6)


def test_nt_xent_and_decas_eq4_match_the_hand_worked_batch_and_differ_on_it():
    assert nt_xent(VIEW_A, VIEW_B, TAU).item() == pytest.approx(NTXENT_2N, rel=1e-6)
    assert deca_nt_xent(VIEW_A, VIEW_B, TAU).item() == pytest.approx(DECA_EQ4, rel=1e-6)
    assert abs(DECA_EQ4 - NTXENT_2N) > 0.1  # -1.0 against 0.637: the two forms are not interchangeable


def test_decas_eq4_runs_from_the_documents_to_the_copies_only():
    """With two pairs Eq. 4 reads the same either way; with three it does not. Documents h1 = (1, 0),
    h2 = (0, 1), h3 = (-1, 0); copies g1 = (1, 0), g2 = (1, 1), g3 = (0, 1); tau = 1/2."""
    documents = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    copies = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    # cos(h_i, g_k): h1: 1, c, 0;  h2: 0, c, 1;  h3: -1, -c, 0
    forward = (
        (-2 + math.log(E2C + 1))  # h1: positive g1 (logit 2), negatives g2 (2c), g3 (0)
        + (-2 * C + math.log(1 + E2))  # h2: positive g2 (2c), negatives g1 (0), g3 (2)
        + (0 + math.log(math.exp(-2) + math.exp(-2 * C)))  # h3: positive g3 (0), negatives g1 (-2), g2 (-2c)
    ) / 3
    backward = (  # the copies as anchors, for contrast: g1 against h2, h3; g2 against h1, h3; g3 against h1, h2
        (-2 + math.log(1 + math.exp(-2))) + (-2 * C + math.log(E2C + math.exp(-2 * C))) + math.log(1 + E2)
    ) / 3
    assert deca_nt_xent(documents, copies, TAU).item() == pytest.approx(forward, rel=1e-6)  # -0.209
    assert deca_nt_xent(copies, documents, TAU).item() == pytest.approx(backward, rel=1e-6)  # 0.104
    assert abs(forward - backward) > 0.1
    with pytest.raises(ValueError, match="at least two pairs"):
        deca_nt_xent(documents[:1], copies[:1], TAU)


@pytest.mark.parametrize(
    ("recipe", "settings", "expected"),
    [
        ("simcse", {"symmetric": False}, INFONCE_A_TO_B),  # SimCSE Eq. 1
        ("docsplit", {"symmetric": False}, INFONCE_A_TO_B),  # SimDE §2.1, Eq. 1 (DocSplit §2.1 cites it)
        ("laser", {"symmetric": False}, INFONCE_A_TO_B),  # LA(SER)^3 §3: "the standard infoNCE loss"
        ("deca", {}, DECA_EQ4),  # DECA §3.2, Eq. 4: the recipe's own loss
        ("deca", {"loss": "ntxent"}, NTXENT_2N),  # SimCLR's 2N form, still there by name
    ],
    ids=["simcse", "docsplit", "laser", "deca", "deca-ntxent"],
)
def test_each_recipe_trains_with_its_papers_loss_on_the_hand_worked_batch(recipe, settings, expected):
    hp = TrialSettings(recipe=recipe, temperature=TAU, mlm_weight=0.0, **settings)
    total, terms = training_loss(hp, {"embeddings": torch.cat([VIEW_A, VIEW_B])})
    assert total.item() == pytest.approx(expected, rel=1e-6)
    assert terms["contrastive_loss"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("recipe", ["simcse", "docsplit", "laser"])
def test_the_infonce_recipes_default_to_both_directions(recipe):
    """doctune's default (``symmetric: true``) averages the papers' direction and its reverse."""
    hp = TrialSettings(recipe=recipe, temperature=TAU)
    total, _ = training_loss(hp, {"embeddings": torch.cat([VIEW_A, VIEW_B])})
    assert total.item() == pytest.approx((INFONCE_A_TO_B + INFONCE_B_TO_A) / 2, rel=1e-6)


def test_info_nce_is_lower_for_aligned_pairs_and_rejects_bad_shapes():
    torch.manual_seed(0)
    a = torch.randn(8, 16)
    assert info_nce(a, a + 0.01 * torch.randn(8, 16), 0.05) < info_nce(a, torch.randn(8, 16), 0.05)
    with pytest.raises(ValueError, match="equal shape"):
        info_nce(a, a[:4], 0.05)


def test_mask_tokens_follows_the_bert_rule():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (64, 128))
    special = torch.zeros_like(ids)
    special[:, 0] = 1
    masked, labels = mask_tokens(ids, special, mask_token_id=3, vocab_size=1000, generator=generator)
    picked = labels != -100
    assert not picked[:, 0].any()  # special tokens are never picked
    assert abs(picked.float().mean().item() - 0.15) < 0.01
    assert torch.equal(labels[picked], ids[picked])
    share_masked = (masked[picked] == 3).float().mean().item()
    share_kept = (masked[picked] == ids[picked]).float().mean().item()
    assert abs(share_masked - 0.8) < 0.03 and abs(share_kept - 0.1) < 0.03
    assert torch.equal(masked[~picked], ids[~picked])


def _tiny_masked_lm(model_type: str):
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        LongformerConfig,
        LongformerForMaskedLM,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    shape = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if model_type == "bert":
        return BertForMaskedLM(BertConfig(**shape))
    if model_type == "roberta":
        return RobertaForMaskedLM(RobertaConfig(**shape, max_position_embeddings=64))
    return LongformerForMaskedLM(LongformerConfig(**shape, max_position_embeddings=64, attention_window=[8, 8]))


@pytest.mark.parametrize("model_type", ["bert", "longformer", "roberta"])
def test_the_masked_positions_only_mlm_loss_and_gradients_equal_the_models_own(model_type):
    torch.manual_seed(0)
    model = _tiny_masked_lm(model_type).eval()  # no dropout: both computations see the same network
    input_ids = torch.randint(5, 300, (3, 32))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, 20:] = 0
    labels = torch.full_like(input_ids, -100)
    labels[:, 1::4] = input_ids[:, 1::4]
    labels[0, 20:] = -100

    expected = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    expected.backward()
    expected_grads = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    loss = masked_lm_loss(model, input_ids, attention_mask, labels)
    loss.backward()
    assert torch.allclose(loss, expected, atol=1e-5)
    for grad, want in zip((p.grad for p in model.parameters()), expected_grads):
        assert (grad is None and want is None) or torch.allclose(grad, want, atol=1e-6)

    none_masked = masked_lm_loss(model, input_ids, attention_mask, torch.full_like(input_ids, -100))
    assert none_masked.item() == 0.0 and none_masked.requires_grad


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _distributed_grad(rank: int, size: int, port: int, weight: torch.Tensor, xa, xb, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)
    w = weight.clone().requires_grad_(True)
    n = xa.shape[0] // size
    local = slice(rank * n, (rank + 1) * n)
    loss = info_nce(gather(xa[local] @ w), gather(xb[local] @ w), 0.1, symmetric=True) * world_size()
    loss.backward()
    dist.all_reduce(w.grad)  # what DDP does, up to its division by world size
    out[rank] = w.grad / size
    dist.destroy_process_group()


def test_gather_keeps_the_local_gradient_and_matches_the_full_batch_gradient():
    torch.manual_seed(0)
    weight, xa, xb = torch.randn(6, 4), torch.randn(8, 6), torch.randn(8, 6)
    w = weight.clone().requires_grad_(True)
    info_nce(xa @ w, xb @ w, 0.1, symmetric=True).backward()
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_distributed_grad, args=(2, _free_port(), weight, xa, xb, out), nprocs=2, join=True)
    for rank in (0, 1):
        torch.testing.assert_close(out[rank], w.grad, rtol=1e-5, atol=1e-6)


def test_gather_is_identity_without_a_process_group():
    x = torch.randn(3, 2)
    assert gather(x) is x and world_size() == 1


# --- NT-Xent, SimSiam, Bregman -----------------------------------------------------------------

from trainers.losses import (  # noqa: E402
    BregmanHead,
    SimSiamPredictor,
    active_subnetworks,
    bregman_divergence,
    bregman_loss,
    simsiam_loss,
)


def test_simsiam_matches_its_formula_and_stops_the_gradient_at_z():
    torch.manual_seed(0)
    p_a, p_b = torch.randn(4, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)
    z_a, z_b = torch.randn(4, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)
    loss = simsiam_loss(p_a, p_b, z_a, z_b)
    cos = torch.nn.functional.cosine_similarity
    expected = -(cos(p_a, z_b).mean() + cos(p_b, z_a).mean()) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    loss.backward()
    assert z_a.grad is None and z_b.grad is None  # stop-gradient: the targets get no gradient
    assert p_a.grad is not None and p_a.grad.abs().sum() > 0
    assert SimSiamPredictor(8)(torch.randn(4, 8)).shape == (4, 8)


def test_the_simsiam_predictor_has_decas_64_hidden_units_whatever_the_embedding_size():
    """DECA App. A.3.2: "a two layer MLPs with 64 hidden", batch normalisation between."""
    for dim in (32, 384, 768):
        net = SimSiamPredictor(dim).net
        assert [type(m).__name__ for m in net] == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
        first, norm, last = net[0], net[1], net[3]
        assert (first.in_features, first.out_features, norm.num_features) == (dim, 64, 64)
        assert (last.in_features, last.out_features) == (64, dim)


def _bregman_by_hand(scores: torch.Tensor, sigma: float, tau: float) -> float:
    m = scores.shape[0]
    n = m // 2
    winners = [int(torch.argmax(scores[j])) for j in range(m)]
    total = 0.0
    for i in range(m):
        logits = {}
        for j in range(m):
            if j != i:
                divergence = float(scores[i].max() - scores[i, winners[j]])
                logits[j] = math.exp(-divergence / (2 * sigma**2)) / tau
        positive = (i + n) % m
        total -= logits[positive] - math.log(sum(math.exp(v) for v in logits.values()))
    return total / m


@pytest.mark.parametrize("k", [2, 5, 8])
def test_bregman_equals_a_direct_transcription_of_the_formula(k):
    torch.manual_seed(k)
    scores_a, scores_b = torch.randn(6, k), torch.randn(6, k)
    expected = _bregman_by_hand(torch.cat([scores_a, scores_b]), sigma=1.5, tau=0.1)
    assert bregman_loss(scores_a, scores_b, 1.5, 0.1).item() == pytest.approx(expected, rel=1e-5)
    divergence = bregman_divergence(torch.cat([scores_a, scores_b]))
    assert (divergence >= 0).all() and torch.allclose(divergence.diagonal(), torch.zeros(12))


def test_bregman_on_simcse_trains_with_eq7_on_the_hand_worked_batch():
    """Saggau et al. Eqs. 3-7, K = 2, on sub-network outputs chosen by hand for the rows h1, h2, g1, g2:
    f(h1) = (1, 0), f(h2) = (0, 1), f(g1) = (2, 0), f(g2) = (0, 1), so the winners k* are 1, 2, 1, 2 and
    D_ij = f_k*(i)(z_i) - f_k*(j)(z_i) is 0 towards rows won by the same sub-network as row i, else 1
    (2 from g1). sigma = 1 makes the similarity exp(-D / 2); the Bregman tau 1/2 doubles it."""
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 1.0]])
    # h1, h2, g2: positive at D 0 (logit 2), the two others at D 1 (logit 2 e^-1/2); g1: the others at D 2
    at_distance_1 = -2 + math.log(E2 + 2 * math.exp(2 * math.exp(-0.5)))
    at_distance_2 = -2 + math.log(E2 + 2 * math.exp(2 * math.exp(-1)))
    bregman = (3 * at_distance_1 + at_distance_2) / 4  # 0.5975
    hp = TrialSettings(
        recipe="simcse",
        symmetric=False,  # the paper's L_mnr: one direction
        temperature=TAU,
        mlm_weight=0.0,
        bregman_k=2,
        bregman_weight=2.0,
        bregman_sigma=1.0,
        bregman_temperature=0.5,
    )
    outputs = {"embeddings": torch.cat([VIEW_A, VIEW_B]), "bregman_scores": scores}
    total, terms = training_loss(hp, outputs)
    assert terms["bregman_loss"] == pytest.approx(bregman, rel=1e-6)
    assert total.item() == pytest.approx(INFONCE_A_TO_B + 2.0 * bregman, rel=1e-6)  # Eq. 7, lambda 2
    assert terms["active_subnetworks"] == 2


def test_bregman_with_one_subnetwork_has_zero_divergence():
    scores = torch.randn(10, 1)
    assert torch.equal(bregman_divergence(scores), torch.zeros(10, 10))
    assert bregman_loss(scores[:5], scores[5:], 1.0, 0.1).item() == pytest.approx(math.log(9), rel=1e-6)


def test_active_subnetworks_counts_argmax_winners():
    scores = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    assert active_subnetworks(scores) == 2
    head = BregmanHead(16, 5)
    assert head(torch.randn(7, 16)).shape == (7, 5)


def test_bregman_subnetworks_are_two_linear_layers_with_batch_normalisation():
    """Saggau et al., App. D: two linear layers, one activation, two batch normalisation layers."""
    head = BregmanHead(16, 5)
    layers = [type(m) for m in head.modules() if m is not head]
    assert layers.count(torch.nn.BatchNorm1d) == 2 and torch.nn.Dropout not in layers
    torch.manual_seed(0)
    scores = head.train()(torch.randn(64, 16) * 3 + 1)
    # in training the batch statistics normalise each sub-network's output across the batch
    assert torch.allclose(scores.mean(dim=0), torch.zeros(5), atol=1e-5)
    assert torch.allclose(scores.var(dim=0, unbiased=False), torch.ones(5), atol=1e-3)


SIMSIAM_TARGETS = torch.randn(2, 4, 5, dtype=torch.double, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(
    "loss_fn",
    [
        lambda a, b: info_nce(a, b, 0.3, symmetric=True),
        lambda a, b: nt_xent(a, b, 0.3),
        lambda a, b: deca_nt_xent(a, b, 0.3),
        # gradients w.r.t. the predictions, with the stop-gradient targets held fixed
        lambda a, b: simsiam_loss(a, b, SIMSIAM_TARGETS[0], SIMSIAM_TARGETS[1]),
    ],
    ids=["infonce", "ntxent", "deca_ntxent", "simsiam"],
)
def test_losses_pass_a_finite_difference_gradient_check(loss_fn):
    torch.manual_seed(0)
    a = torch.randn(4, 5, dtype=torch.double, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: loss_fn(x, y).double(), (a, b), eps=1e-6, atol=1e-4)


def test_bregman_passes_a_finite_difference_gradient_check():
    torch.manual_seed(0)
    # well-separated maxima so the argmax does not flip under the finite-difference step
    base = torch.randn(6, 4, dtype=torch.double) + torch.eye(6, 4, dtype=torch.double) * 5
    scores = base.clone().requires_grad_(True)

    def loss(x):
        return bregman_loss(x[:3], x[3:], 1.0, 0.5).double()

    assert torch.autograd.gradcheck(loss, (scores,), eps=1e-6, atol=1e-4)


def test_the_bregman_term_is_on_exactly_when_there_are_subnetworks():
    """``bregman_k`` is the switch (0: no term); on, the other settings default to App. A's selection."""
    embeddings = torch.randn(6, 8)
    off = LossHeads(TrialSettings(), 8)
    assert off.bregman is None and "bregman_loss" not in training_loss(TrialSettings(), {"embeddings": embeddings})[1]
    hp = TrialSettings(bregman_k=10)
    assert (hp.bregman_weight, hp.bregman_sigma, hp.bregman_temperature) == (2.0, 2.0, 0.1)
    on = LossHeads(hp, 8).eval()
    outputs = {"embeddings": embeddings, **on(embeddings)}
    assert outputs["bregman_scores"].shape == (6, 10)
    total, terms = training_loss(hp, outputs)
    assert total.item() == pytest.approx(terms["contrastive_loss"] + 2.0 * terms["bregman_loss"], rel=1e-6)


def test_training_loss_combines_the_terms_with_their_weights():
    torch.manual_seed(0)
    hp = TrialSettings(
        loss="ntxent", temperature=0.2, bregman_weight=0.5, bregman_k=3, contrastive_weight=2.0, mlm_weight=0.1
    )
    heads = LossHeads(hp, 8).eval()
    embeddings = torch.randn(6, 8)
    outputs = {"embeddings": embeddings, "mlm_loss": torch.tensor(3.0), **heads(embeddings)}
    total, terms = training_loss(hp, outputs)
    scores = outputs["bregman_scores"]
    expected = (
        2.0 * nt_xent(embeddings[:3], embeddings[3:], 0.2)
        + 0.1 * 3.0
        + 0.5 * bregman_loss(scores[:3], scores[3:], hp.bregman_sigma, hp.bregman_temperature)
    )
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)
    assert terms["loss"] == pytest.approx(expected.item(), rel=1e-6)
    assert set(terms) == {
        "loss",
        "contrastive_loss",
        "mlm_loss",
        "bregman_loss",
        "active_subnetworks",
        "positive_cosine",
        "negative_cosine",
    }
    # the views' cosines: each pair's, and every view A's with the other pairs' views B
    cosines = (
        torch.nn.functional.normalize(embeddings[:3], dim=-1) @ torch.nn.functional.normalize(embeddings[3:], dim=-1).T
    )
    assert terms["positive_cosine"] == pytest.approx(cosines.diagonal().mean().item(), rel=1e-5)
    assert terms["negative_cosine"] == pytest.approx(cosines[~torch.eye(3, dtype=bool)].mean().item(), rel=1e-5)


def test_a_sampled_temperature_changes_the_loss():
    embeddings = torch.randn(8, 16)
    low = training_loss(TrialSettings(temperature=0.02, mlm_weight=0.0), {"embeddings": embeddings})[0]
    high = training_loss(TrialSettings(temperature=0.5, mlm_weight=0.0), {"embeddings": embeddings})[0]
    assert low.item() != pytest.approx(high.item())
