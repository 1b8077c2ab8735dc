"""The two embedding runtimes: late-chunking means by hand, ONNX Runtime giving torch's vectors
with the packaged model, the export cache, backend choice and its errors, thread requests."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from livingrag.errors import ModelUnavailable
from livingrag.models.embedder import Embedder, get_embedder, resolve_model_path
from livingrag.models.onnx_embedder import OnnxEmbedder, mean_pooled_layout
from livingrag.models.spans import span_means
from livingrag.models.threads import requested_threads, set_torch_threads

TEXTS = [
    "Who directed Casablanca?",
    "Paris is the capital of France. It lies on the Seine.",
    "A very long passage. " * 200,  # cut at the model's 256 tokens
    "",
]


def test_span_means_by_hand() -> None:
    tokens = np.array([[9.0, 9.0], [3.0, 0.0], [1.0, 0.0], [0.0, 2.0], [9.0, 9.0]])
    offsets = np.array([[0, 0], [0, 5], [6, 9], [10, 14], [0, 0]])  # first and last: special tokens
    got = span_means(tokens, offsets, [(0, 9), (10, 14), (20, 30), (5, 6)])
    assert got[0] is not None and got[1] is not None
    assert np.allclose(got[0], [1.0, 0.0])  # mean (2, 0), normalised
    assert np.allclose(got[1], [0.0, 1.0])
    assert got[2] is None and got[3] is None  # no token inside


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache: Path) -> OnnxEmbedder:
    emb = get_embedder("all-MiniLM-L6-v2", "cpu", 64, "onnx", str(onnx_cache))
    assert isinstance(emb, OnnxEmbedder)
    return emb


def test_onnx_gives_the_torch_vectors(onnx_embedder: OnnxEmbedder) -> None:
    torch_embedder = get_embedder("all-MiniLM-L6-v2", "cpu", 64, "torch")
    assert isinstance(torch_embedder, Embedder) and torch_embedder.backend == "torch"
    a, b = onnx_embedder.encode(TEXTS), torch_embedder.encode(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384) and onnx_embedder.dim == 384
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(axis=1).min() > 0.9999
    assert np.allclose(onnx_embedder.encode_one(TEXTS[0]), a[0], atol=1e-6)  # batching changes nothing
    assert onnx_embedder.encode([]).shape == (0, 384)
    spans = [[(0, 33), (34, 54), (200, 210)]]
    pa, sa = onnx_embedder.encode_with_spans(TEXTS[1:2], spans)
    pb, sb = torch_embedder.encode_with_spans(TEXTS[1:2], spans)
    assert float(pa[0] @ pb[0]) > 0.9999 and float(pa[0] @ a[1]) > 0.9999
    assert sa[0][0] is not None and sb[0][0] is not None and sa[0][1] is not None and sb[0][1] is not None
    assert float(sa[0][0] @ sb[0][0]) > 0.9999 and float(sa[0][1] @ sb[0][1]) > 0.9999
    assert sa[0][2] is None and sb[0][2] is None  # past the text's end


def test_batches_hold_a_bounded_number_of_tokens(onnx_embedder: OnnxEmbedder) -> None:
    """Longest first; no batch pads more than TOKENS_PER_BATCH tokens or holds more than the batch
    size; every text is in exactly one batch."""
    from livingrag.models.onnx_embedder import TOKENS_PER_BATCH

    texts = ["word " * n for n in (400, 3, 250, 60, 0, 120, 7)] * 20
    batches = onnx_embedder._batches(texts, 64)
    seen = np.concatenate([idx for idx, _ in batches])
    assert sorted(seen.tolist()) == list(range(len(texts)))
    widths = []
    for idx, encs in batches:
        width = max(len(e.ids) for e in encs)
        assert len(idx) <= 64 and (len(idx) == 1 or len(idx) * width <= TOKENS_PER_BATCH)
        widths.append(width)
    assert widths == sorted(widths, reverse=True) and widths[0] == onnx_embedder.max_seq_length


def test_the_export_is_kept_and_renewed_when_the_model_changes(
    onnx_embedder: OnnxEmbedder, onnx_cache: Path, tmp_path: Path
) -> None:
    path = onnx_embedder.onnx_path
    assert path.parent == onnx_cache and path.name.startswith("all-MiniLM-L6-v2-") and path.suffix == ".onnx"
    stamp = path.stat().st_mtime_ns
    again = OnnxEmbedder("all-MiniLM-L6-v2", onnx_embedder.model_dir, cache_dir=onnx_cache)
    assert again.onnx_path == path and path.stat().st_mtime_ns == stamp  # not exported again
    copy = tmp_path / "minilm"
    shutil.copytree(onnx_embedder.model_dir, copy)
    (copy / "README.md").write_text("changed")
    changed = OnnxEmbedder("all-MiniLM-L6-v2", copy, cache_dir=onnx_cache)
    assert changed.onnx_path != path and changed.onnx_path.exists()
    assert not [p for p in onnx_cache.iterdir() if p.name.endswith(".tmp")]  # no half-written export left
    # the same files reinstalled (new modification times): the export is reused, not made again
    same = tmp_path / "reinstalled"
    shutil.copytree(onnx_embedder.model_dir, same)
    for f in same.rglob("*"):
        os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    assert OnnxEmbedder("all-MiniLM-L6-v2", same, cache_dir=onnx_cache).onnx_path == path


def test_int8_question_vectors_stay_close_to_the_float_ones(onnx_embedder: OnnxEmbedder, onnx_cache: Path) -> None:
    from livingrag.config import ModelSettings
    from livingrag.models.embedder import embedder_from_settings

    q8 = get_embedder("all-MiniLM-L6-v2", "cpu", 64, "onnx", str(onnx_cache), True)
    assert isinstance(q8, OnnxEmbedder) and q8.backend == "onnx-int8" and q8.dim == 384
    assert q8.onnx_path == onnx_embedder.onnx_path.with_suffix(".int8.onnx") and q8.onnx_path.exists()
    questions = ["Who directed Casablanca?", "When did the director of Wild Gals die?", "Is Lyon in France?"]
    for q in questions:  # one question at a time, as they are asked
        cos = float(np.dot(q8.encode([q])[0], onnx_embedder.encode([q])[0]))
        assert 0.99 <= cos < 1.0
    # a text's int8 vector does not depend on the texts encoded with it
    together = q8.encode(questions)
    np.testing.assert_array_equal(together, np.stack([q8.encode([q])[0] for q in questions]))
    # settings: queries get int8 unless told float32; passages are always float32
    m = ModelSettings(embedding_backend="onnx", onnx_cache_dir=onnx_cache)
    assert embedder_from_settings(m, queries=True).backend == "onnx-int8"
    assert embedder_from_settings(m).backend == "onnx"
    flt = ModelSettings(embedding_backend="onnx", onnx_cache_dir=onnx_cache, query_embedding="float32")
    assert embedder_from_settings(flt, queries=True).backend == "onnx"
    with pytest.raises(ValueError, match="query_embedding"):
        ModelSettings(query_embedding="int4")  # type: ignore[arg-type]


def test_a_session_per_requested_thread_count(onnx_embedder: OnnxEmbedder) -> None:
    seen: dict[str, int] = {}

    def other() -> None:
        seen["other"] = requested_threads()

    set_torch_threads(1)
    try:
        assert requested_threads() == 1
        t = threading.Thread(target=other)
        t.start()
        t.join()
        onnx_embedder.encode(["one thread"])
        assert 1 in onnx_embedder._sessions
    finally:
        set_torch_threads(None)
    assert seen["other"] >= 1 and requested_threads() == seen["other"]  # the default: one per core


def test_backend_choice_and_its_errors(tmp_path: Path, onnx_cache: Path) -> None:
    with pytest.raises(ValueError, match="auto, onnx or torch"):
        get_embedder("all-MiniLM-L6-v2", "cpu", 64, "tensorrt")
    auto = get_embedder("all-MiniLM-L6-v2", "cpu", 64, "auto", str(onnx_cache))
    assert auto.backend == "onnx"
    # a model this backend cannot reproduce (CLS pooling): onnx refuses by name
    cls_model = tmp_path / "cls-model"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), cls_model)
    pooling = cls_model / "1_Pooling" / "config.json"
    pooling.write_text(pooling.read_text().replace('"pooling_mode_cls_token": false', '"pooling_mode_cls_token": true'))
    assert mean_pooled_layout(cls_model) is None
    with pytest.raises(ModelUnavailable, match="not a local mean-pooled sentence-transformers model"):
        get_embedder(str(cls_model), "cpu", 64, "onnx", str(onnx_cache))
    with pytest.raises(ModelUnavailable, match="runs on the CPU"):
        get_embedder("all-MiniLM-L6-v2", "cuda", 64, "onnx", str(onnx_cache))
    # auto falls back to torch for it
    assert get_embedder(str(cls_model), "cpu", 64, "auto", str(onnx_cache)).backend == "torch"


def test_int8_quantization_leaves_no_scratch_files_behind(
    onnx_embedder: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX Runtime's quantizer writes scratch files into the working directory; livingrag runs it
    in a scratch folder of its own, so neither the user's directory nor the cache keeps them."""
    from livingrag.models.onnx_embedder import quantize_int8

    cwd, out = tmp_path / "cwd", tmp_path / "cache"
    cwd.mkdir()
    out.mkdir()
    monkeypatch.chdir(cwd)
    quantize_int8(onnx_embedder.onnx_path, out / "m.int8.onnx")
    assert list(cwd.iterdir()) == []
    assert [p.name for p in out.iterdir()] == ["m.int8.onnx"]


def test_a_failed_quantization_names_the_model_and_leaves_nothing(tmp_path: Path) -> None:
    from livingrag.errors import ModelUnavailable
    from livingrag.models.onnx_embedder import quantize_int8

    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(ModelUnavailable, match=r"broken\.onnx"):
        quantize_int8(bad, tmp_path / "broken.int8.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.onnx"]
