"""Faster CPU backends for the embedding model: ONNX Runtime in fp32 ("onnx") and dynamic int8 ("onnx-int8"),
OpenVINO with static int8 ("openvino-int8", calibrated on page texts its caller hands in).

Why not sentence-transformers' own ``backend="onnx"``: it needs optimum-onnx, whose newest release (0.1.0)
requires transformers<4.58, while this project pins transformers==5.24.0. So the model is exported here with
``torch.onnx.export`` (fp32) and quantized with ONNX Runtime's ``quantize_dynamic`` (optimum's per-CPU weight
types; FFN outputs stay fp32, see `_quantize`), and the SentenceTransformer keeps its tokenizer, pooling and
normalization: only the transformer's forward pass runs in ONNX Runtime or OpenVINO (`use_backend`).

"openvino-int8" quantizes the same fp32 export with NNCF (static: activation ranges measured once on calibration
texts, with SmoothQuant for the transformer's activation outliers) and runs it in OpenVINO. The caller chooses the
texts (local_rag.py: the pages of the sample PDFs, via `calibration_texts`); their fingerprint names the export.
Fixed activation scales make a text's vector independent of the other texts in its batch, unlike "onnx-int8",
whose scales are measured per batch. On x86 CPUs without an int32-accumulating int8 dot product (VNNI), OpenVINO's
int8 kernels can saturate and are slower than f32, so there the same model runs its steps in f32 (`runtime_suffix`).

The export is made locally at first use, from the loaded model (no download, works with HF_HUB_OFFLINE=1),
into ``model_cache()/<model>-<fingerprint>/<backend>/``: written into a temp folder beside it, then renamed,
so an interrupted export never leaves a half model that a later run loads. The fingerprint hashes the
weights and config, so a changed model gets a new export. Nothing is written into site-packages.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from localrag.errors import RAGError
from localrag.files import display_path, log
from localrag.settings import EMBEDDING_BACKENDS as BACKENDS  # the backends local_rag accepts

# Default cache of exported models (XDG_CACHE_HOME is honoured); the env variable below overrides it.
MODEL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "localrag" / "models"
# Environment variable naming another cache folder, read at every call (tests point it at a temp folder).
MODEL_CACHE_ENV = "LOCALRAG_MODEL_CACHE"
# ONNX opset of the export; 17 has LayerNormalization and is read by every ONNX Runtime since 1.13.
ONNX_OPSET = 17
# Bump when the export recipe changes: older cache entries are then not reused.
EXPORT_FORMAT = 2
# Config keys that say where a model was loaded from or saved with, not what it computes.
FINGERPRINT_IGNORED_CONFIG = ("_name_or_path", "transformers_version")
# Operators the int8 export quantizes: the weight MatMuls (the embedding Gather stays fp32; it costs no time).
QUANTIZED_OPS = ("MatMul",)
# Transformer inputs the export accepts, in this order, when the tokenizer produces them.
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Attention written out as MatMul/Softmax for the export: torch's "sdpa" path exports extra IsNaN/Where masking
# that cost ONNX Runtime ~15% of its time; the results are the same.
EXPORT_ATTENTION = "eager"
# File and info names inside one backend folder (OpenVINO writes model.bin beside its model.xml).
ONNX_FILE = "model.onnx"
OPENVINO_FILE = "model.xml"
INFO_FILE = "export_info.json"
# Seconds the first-use export of all-MiniLM-L6-v2 took on 2 cores (load average 0.5-2), per backend: the figure the
# "exporting once" note gives (a larger model takes longer).
EXPORT_SECONDS = {"onnx": 2, "onnx-int8": 4, "openvino-int8": 15}
# Attribute of a SentenceTransformer naming the export it runs (set by use_backend).
EXPORT_ATTRIBUTE = "localrag_export"
# Attribute of a SentenceTransformer on OpenVINO: a threading.local whose `queue` (a deque of callables) holds work
# of that thread's caller which `run` does while the model computes a batch (see `wait_work`).
WAIT_WORK_ATTRIBUTE = "localrag_wait_work"
# Prefix of the temp folders an export writes before its rename; never loaded.
TMP_PREFIX = ".tmp-"
# Temp folders older than this are leftovers of a killed export (a live one takes seconds) and are deleted.
STALE_TMP_SECONDS = 3600
# Packages the export needs, as requirements.txt pins them; named in error messages.
EXPORT_REQUIREMENTS = "onnx==1.23.2 onnxruntime==1.32.0"
OPENVINO_REQUIREMENTS = "openvino==2026.4.1 nncf==3.4.0"
# Shorter pages (an image-only page) are no calibration samples.
CALIBRATION_MIN_CHARS = 200
# Fewer calibration pages than this give activation ranges too narrow to trust on other documents.
CALIBRATION_MIN_PAGES = 20
# OpenVINO runs the layers it does not quantize (softmax, LayerNorm, GELU) in f32; on CPUs with bf16 it would pick
# bf16. On the AMD EPYC (Zen 4) build machine bf16 embedded 6-8% more FinanceBench chunks/s, but the index it built
# ranked worse: hybrid MRR 0.268 -> 0.243 (p = 0.027), dense 0.293 -> 0.275 (bench/README.md).
OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
# x86 CPU flags of an int8 dot product that accumulates in int32 (VNNI, AMX). Without one, OpenVINO's int8 kernels
# multiply with VPMADDUBSW, whose int16 pair sums can saturate: on an AVX2-only EPYC the worst test sentence came out at
# cosine 0.940 to torch against 0.955 with the same model's steps in f32, which ran 1.13x faster (bench/README.md).
INT8_DOT_PRODUCT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# OpenVINO's CPU option that runs a quantized model's steps (quantize, dequantize, matmul) in f32 instead of int8.
OPENVINO_F32_STEPS = {"LP_TRANSFORMS_MODE": False}
# Suffix of the export name where the int8 model runs in f32 steps: its vectors differ from the int8 kernels' ones.
OPENVINO_F32_SUFFIX = "-f32-steps"
# Inference streams of the OpenVINO model (at most one per thread): a batch's jobs (OPENVINO_JOB_ROWS) run on them
# at once. Two streams of one thread each embedded 1.06-1.12x the chunks/s of one stream of two threads on the busy
# 2-core machine (bench/README.md, index_financebench.py); the vectors are bit-identical (tests/test_embeddings.py).
OPENVINO_STREAMS = 2
# Rows per OpenVINO inference: a batch goes out longest row first in jobs of this many rows, each padded only to its
# own longest row, to whichever stream is free. On 1,024 FinanceBench chunks: 88 chunks/s against 83 with whole
# batches split in halves; jobs of 1 row ran at 81, of 2 at 86, of 8 at 88, of 16 at 83 (bench/README.md).
OPENVINO_JOB_ROWS = 4
# A job's width is rounded up to a multiple of this many tokens: OpenVINO keeps compiled kernels per input shape
# (CPU_RUNTIME_CACHE_CAPACITY), and jobs at every width from 1 to 256 grew the process by ~1.7 GB.
OPENVINO_JOB_WIDTH_STEP = 16
# Jobs OpenVINO holds at once (one inference request each): all jobs of a batch (local_rag's 64 texts in jobs of 4)
# are queued before `run` does its caller's waiting work, so both streams keep computing while it does.
OPENVINO_QUEUED_JOBS = 16


@dataclass(frozen=True)
class QuantizationSettings:
    """Dynamic quantization of one CPU family, as optimum's AutoQuantizationConfig.<name>(is_static=False)."""
    name: str
    weights_signed: bool  # int8 weights (u8 activations x s8 weights) or uint8 (u8 x u8)
    per_channel: bool = True
    reduce_range: bool = False


# optimum-onnx 0.1.0 configuration.py: avx512_vnni and arm64 use s8 weights, avx2 u8 weights; all per channel,
# full range, symmetric weights, asymmetric activations. AVX-512 without VNNI gets the avx2 settings: its
# u8 x s8 instruction (VPMADDUBSW) can saturate, u8 x u8 cannot.
QUANTIZATION = {
    "avx512_vnni": QuantizationSettings("avx512_vnni", weights_signed=True),
    "avx2": QuantizationSettings("avx2", weights_signed=False),
    "arm64": QuantizationSettings("arm64", weights_signed=True),
}


class BackendError(RAGError, RuntimeError):
    """The chosen backend cannot be used; the message says which model, which backend and what to do."""


# ----------------------------------------------------------------------------- pure helpers

def check_backend(backend: str) -> str:
    """The backend name if known, else a ValueError that lists the choices."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; use one of {', '.join(BACKENDS)}")
    return backend


def model_cache() -> Path:
    """The cache folder: $LOCALRAG_MODEL_CACHE if set, else MODEL_CACHE."""
    return Path(os.environ.get(MODEL_CACHE_ENV) or MODEL_CACHE).expanduser()


def quantization_for_cpu(machine: str, cpu_flags: set[str]) -> str:
    """Name of the QUANTIZATION entry fit for a CPU: arm64, avx512_vnni, else avx2 (safe on any x86-64).

    `machine` is platform.machine() ("x86_64", "AMD64", "aarch64", "arm64"); `cpu_flags` the /proc/cpuinfo flags.
    """
    if machine.lower() in ("arm64", "aarch64"):
        return "arm64"
    return "avx512_vnni" if "avx512_vnni" in cpu_flags else "avx2"


def openvino_int8_kernels(machine: str, cpu_flags: set[str]) -> bool:
    """Whether OpenVINO may run the int8 model with its int8 kernels on this CPU: yes on ARM and where the flags
    are unknown (empty: not Linux), and on x86 with one of INT8_DOT_PRODUCT_FLAGS; else its steps run in f32."""
    if machine.lower() in ("arm64", "aarch64") or not cpu_flags:
        return True
    return any(flag in cpu_flags for flag in INT8_DOT_PRODUCT_FLAGS)


def read_cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags Linux reports; empty where the file is missing (macOS, Windows)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 says flags, ARM says Features
            return set(value.split())
    return set()


def backend_folder_name(backend: str, variant: str | None) -> str:
    """Folder of one backend's export: "onnx"; "onnx-int8-<QUANTIZATION name>" (a dynamic int8 model is
    CPU-specific); "openvino-int8-<12 hex of the calibration fingerprint>" (other calibration, other model)."""
    check_backend(backend)
    if backend == "onnx-int8":
        if variant not in QUANTIZATION:
            raise ValueError(f"unknown quantization {variant!r}; use one of {', '.join(QUANTIZATION)}")
        return f"{backend}-{variant}"
    if backend == "openvino-int8":
        if not isinstance(variant, str) or not re.fullmatch(r"[0-9a-f]{12}", variant):
            raise ValueError(f"calibration fingerprint {variant!r} is not 12 lowercase hex digits")
        return f"{backend}-{variant}"
    return backend


def model_file_name(backend: str) -> str:
    """The file `prepare` returns for a backend: OPENVINO_FILE for OpenVINO, else ONNX_FILE."""
    return OPENVINO_FILE if check_backend(backend) == "openvino-int8" else ONNX_FILE


def texts_fingerprint(texts: Sequence[str]) -> str:
    """sha256 over the texts in order, each length-prefixed so that ["ab", "c"] and ["a", "bc"] differ."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def calibration_texts(pdfs: Sequence[str | Path], min_chars: int = CALIBRATION_MIN_CHARS,
                      min_pages: int = CALIBRATION_MIN_PAGES) -> list[str]:
    """Text of every page with at least `min_chars` characters of `pdfs`, in order, as pypdfium2 extracts it.

    BackendError when a PDF is missing or unreadable, or when they hold fewer than `min_pages` such pages.
    """
    import pypdfium2

    missing = [str(pdf) for pdf in pdfs if not Path(pdf).is_file()]
    if missing:
        raise BackendError(f"openvino-int8 cannot calibrate: {len(missing)} of its {len(pdfs)} calibration PDFs "
                           f"are missing: {', '.join(missing)}")
    texts = []
    for pdf in pdfs:
        try:
            document = pypdfium2.PdfDocument(str(pdf))
            try:
                for number in range(len(document)):
                    page = document[number]
                    textpage = page.get_textpage()
                    text = textpage.get_text_range().strip()
                    textpage.close()
                    page.close()
                    if len(text) >= min_chars:
                        texts.append(text)
            finally:
                document.close()
        except Exception as exc:  # noqa: BLE001 - whatever breaks, the export cannot be calibrated
            raise BackendError(f"openvino-int8 cannot calibrate: calibration PDF {pdf} is unreadable: "
                               f"{type(exc).__name__}: {exc}") from exc
    if len(texts) < min_pages:
        raise BackendError(f"openvino-int8 cannot calibrate: its {len(pdfs)} calibration PDFs hold {len(texts)} "
                           f"pages of at least {min_chars} characters, it needs {min_pages}")
    return texts


def model_folder_name(display_name: str, fingerprint: str) -> str:
    """Cache folder of one model: its display name made file-safe, then 16 hex digits of its fingerprint.

    "BAAI/bge-small-en-v1.5" -> "BAAI--bge-small-en-v1.5-<16 hex>"; anything but letters, digits, ".", "-", "_"
    becomes "_", so a name can never climb out of the cache.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", display_name.replace("/", "--")).strip(".") or "model"
    return f"{safe}-{fingerprint[:16]}"


def remove_stale_tmp(root: Path, max_age_s: float = STALE_TMP_SECONDS, now: float | None = None) -> list[str]:
    """Delete TMP_PREFIX folders in `root` last modified over `max_age_s` ago; returns their names."""
    now = time.time() if now is None else now
    removed = []
    for entry in sorted(root.glob(TMP_PREFIX + "*")):
        try:
            if entry.is_dir() and now - entry.stat().st_mtime > max_age_s:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
        except OSError:
            continue  # gone meanwhile: another process cleaned it
    return removed


# ----------------------------------------------------------------------------- fingerprint

def model_fingerprint(model: Any) -> str:
    """sha256 over the transformer's config (less FINGERPRINT_IGNORED_CONFIG) and every weight, in state_dict order.

    Two copies of one model give the same value wherever they were loaded from; changing any weight changes it.
    """
    import torch

    digest = hashlib.sha256(f"export-format {EXPORT_FORMAT}\n".encode())
    config = _transformer(model).auto_model.config.to_dict()
    for key in FINGERPRINT_IGNORED_CONFIG:
        config.pop(key, None)
    digest.update(json.dumps(config, sort_keys=True, default=str).encode("utf-8"))
    for name, tensor in model.state_dict().items():
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"\n{name} {data.dtype} {tuple(data.shape)}\n".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- export

def export_variant(backend: str, calibration: Sequence[str] | None = None) -> str | None:
    """What tells two exports of one backend apart: the CPU's QUANTIZATION entry ("onnx-int8"), 12 hex digits of
    the calibration texts' fingerprint ("openvino-int8", which needs them), None for the others."""
    if backend == "onnx-int8":
        return quantization_for_cpu(platform.machine(), read_cpu_flags())
    if backend == "openvino-int8":
        calibration = list(calibration or [])
        if not calibration:
            raise ValueError("openvino-int8 needs at least one calibration text: pass calibration=, "
                             "e.g. calibration_texts(pdfs)")
        return texts_fingerprint(calibration)[:12]
    return None


def expected_export_name(backend: str, calibration: Sequence[str] | None = None) -> str:
    """What `export_name` says once `use_backend` has run on this machine, known without loading the model."""
    if check_backend(backend) == "torch":
        return "torch"
    return backend_folder_name(backend, export_variant(backend, calibration)) + runtime_suffix(backend)


def runtime_suffix(backend: str) -> str:
    """What the export name adds for how this CPU runs the export: OPENVINO_F32_SUFFIX for "openvino-int8" on a CPU
    whose int8 kernels would saturate (`openvino_int8_kernels`), else nothing."""
    if backend == "openvino-int8" and not openvino_int8_kernels(platform.machine(), read_cpu_flags()):
        return OPENVINO_F32_SUFFIX
    return ""


def prepare(model: Any, display_name: str, backend: str, cache: Path | None = None,
            calibration: Sequence[str] | None = None) -> Path:
    """The model file of `model` for `backend` (not "torch"), exported into the cache on first use.

    `model` is the loaded torch SentenceTransformer. Later calls (any process) find the file and reuse it.
    `calibration`: the texts "openvino-int8" measures its activation ranges on (required there; see
    `calibration_texts`); their fingerprint is part of the export's folder name.
    """
    check_backend(backend)
    if backend == "torch":
        raise ValueError("the torch backend needs no export; call prepare only for onnx, onnx-int8 or openvino-int8")
    calibration = list(calibration or []) if backend == "openvino-int8" else calibration  # read once, kept
    variant = export_variant(backend, calibration)
    root = (cache or model_cache()) / model_folder_name(display_name, model_fingerprint(model))
    final = root / backend_folder_name(backend, variant)
    name = model_file_name(backend)
    if (final / name).is_file():
        return final / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(root)
        tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX + final.name + "-", dir=root))
    except OSError as exc:
        raise BackendError(f"cannot create the model cache folder {root} for embedding model {display_name!r} "
                           f"({exc}); set {MODEL_CACHE_ENV} to a writable folder") from exc
    log(export_note(display_name, backend, final))
    try:
        _export_into(model, tmp, backend, variant, calibration)
        _write_info(tmp, display_name, backend, variant, calibration)
        if final.exists() and not (final / name).is_file():
            shutil.rmtree(final)  # emptied by hand; only a folder with the model file is ever trusted
        try:
            os.rename(tmp, final)  # atomic on one filesystem: the folder appears whole or not at all
        except OSError:
            if not (final / name).is_file():  # else another process finished first: use its export
                raise
    except Exception as exc:  # noqa: BLE001 - any failure here means "this backend cannot be used"
        needs = EXPORT_REQUIREMENTS + (" " + OPENVINO_REQUIREMENTS if backend == "openvino-int8" else "")
        raise BackendError(f"could not export embedding model {display_name!r} for backend {backend!r}: "
                           f"{type(exc).__name__}: {exc}. The export needs {needs} "
                           f"(pip install -r requirements.txt); or set EMBEDDING_BACKEND = 'torch'") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / name


def export_note(display_name: str, backend: str, folder: Path) -> str:
    """The stderr line before a first-use export: once, where it is kept, how long it takes (EXPORT_SECONDS)."""
    return (f"Exporting embedding model {display_name} for {backend} once (about {EXPORT_SECONDS[backend]} s on 2 "
            f"cores for all-MiniLM-L6-v2, longer for a larger model) into {display_path(folder)}; later runs load "
            f"it from there")


def _export_into(model: Any, folder: Path, backend: str, variant: str | None,
                 calibration: Sequence[str] | None = None) -> None:
    """Write the backend's model file into `folder`: the fp32 graph, or one of its int8 quantizations."""
    raw = folder / "raw.onnx"
    _export_fp32(model, raw)
    if backend == "onnx":
        raw.rename(folder / ONNX_FILE)
    elif backend == "onnx-int8":
        _quantize(raw, folder / ONNX_FILE, QUANTIZATION[variant], _transformer(model).auto_model.config)
    else:
        _quantize_openvino(raw, folder / OPENVINO_FILE, _calibration_samples(model, calibration or []))
    raw.unlink(missing_ok=True)


def _export_fp32(model: Any, path: Path) -> None:
    """torch.onnx.export of the transformer: inputs as MODEL_INPUTS, output last_hidden_state, dynamic shapes."""
    import torch

    transformer = _transformer(model)
    names = [n for n in MODEL_INPUTS if n in _tokenizer_inputs(transformer)]
    # A padded batch: the mask path is traced with padding present, as real batches have.
    dummy = transformer.tokenizer(["an export sample with padding", "short"], padding=True, return_tensors="pt")

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs)), return_dict=True).last_hidden_state

    inner = transformer.auto_model
    wrapper = LastHiddenState(inner)
    was_training = inner.training
    attention = _set_attention(inner, EXPORT_ATTENTION)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer warnings about Python branches on shapes; checked by tests
            torch.onnx.export(wrapper.eval(), tuple(dummy[n] for n in names), str(path), input_names=names,
                              output_names=["last_hidden_state"], opset_version=ONNX_OPSET, dynamo=False,
                              dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]})
    finally:
        inner.train(was_training)  # export restores the wrapper's mode, which is "training"
        _set_attention(inner, attention)


def _set_attention(model: Any, implementation: str | None) -> str | None:
    """Switch a transformers model's attention implementation; returns the previous one (unchanged if refused)."""
    previous = getattr(model.config, "_attn_implementation", None)
    if implementation and implementation != previous and hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(implementation)
        except (ValueError, ImportError):
            pass  # a model without that implementation exports with its own
    return previous


def _quantize(source: Path, target: Path, settings: QuantizationSettings, config: Any) -> None:
    """Dynamic int8 quantization of the weight MatMuls with optimum's per-CPU settings, FFN outputs left in fp32.

    Symmetric weights, asymmetric u8 activations, as optimum. Unlike optimum, only MatMuls with a constant weight
    (no attention score products: quantize_dynamic's default) and not the embedding lookup (Gather) are quantized.
    """
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded = ffn_output_matmuls(onnx.load(str(source), load_external_data=False),
                                  getattr(config, "intermediate_size", None), getattr(config, "hidden_size", None))
    quantization_log = logging.getLogger()  # quantize_dynamic warns on the root logger to "pre-process" first
    level = quantization_log.level
    quantization_log.setLevel(logging.ERROR)
    try:
        quantize_dynamic(str(source), str(target), op_types_to_quantize=list(QUANTIZED_OPS),
                         nodes_to_exclude=excluded, per_channel=settings.per_channel,
                         reduce_range=settings.reduce_range,
                         weight_type=QuantType.QInt8 if settings.weights_signed else QuantType.QUInt8,
                         extra_options={"WeightSymmetric": True, "ActivationSymmetric": False,
                                        "MatMulConstBOnly": True})
    finally:
        quantization_log.setLevel(level)


def ffn_output_matmuls(graph_model: Any, intermediate_size: int | None, hidden_size: int | None) -> list[str]:
    """Names of the MatMul nodes whose constant weight is [intermediate_size, hidden_size]: the FFN down-projections.

    Their input is the GELU output, whose outliers a per-tensor u8 activation scale clips (Bondarenko et al.,
    "Understanding and Overcoming the Challenges of Efficient Transformer Quantization", EMNLP 2021).
    Empty when the sizes are unknown.
    """
    if not intermediate_size or not hidden_size:
        return []
    shapes = {tensor.name: list(tensor.dims) for tensor in graph_model.graph.initializer}
    return [node.name for node in graph_model.graph.node
            if node.op_type == "MatMul" and len(node.input) == 2
            and shapes.get(node.input[1]) == [intermediate_size, hidden_size]]


def _calibration_samples(model: Any, texts: Sequence[str]) -> list[dict[str, Any]]:
    """One unpadded model input per text, tokenized and truncated as the SentenceTransformer does."""
    import numpy as np

    transformer = _transformer(model)
    names = [n for n in MODEL_INPUTS if n in _tokenizer_inputs(transformer)]
    samples = []
    for text in texts:
        encoded = transformer.tokenizer([text], truncation=True, max_length=transformer.max_seq_length,
                                        return_tensors="np")
        samples.append({n: np.asarray(encoded[n], dtype=np.int64) for n in names})
    return samples


def import_without_telemetry(name: str) -> Any:
    """Import `name` ("openvino" or "nncf") with openvino_telemetry hidden, so both use their no-op stubs.

    Both send usage events to Google Analytics unless a consent file in the home folder says no, and importing
    openvino writes a client id into ~/intel; a tool for private documents must do neither. A None entry in
    sys.modules makes "import openvino_telemetry" raise ImportError, which both packages answer with their stub
    (openvino/tools/ovc/telemetry_utils.py, nncf/telemetry/wrapper.py).
    """
    import importlib
    import sys

    if name in sys.modules:
        return sys.modules[name]
    hidden = sys.modules.get("openvino_telemetry", _MISSING)
    sys.modules["openvino_telemetry"] = None
    try:
        return importlib.import_module(name)
    finally:
        if hidden is _MISSING:
            del sys.modules["openvino_telemetry"]
        else:
            sys.modules["openvino_telemetry"] = hidden


_MISSING = object()


def _quantize_openvino(source: Path, target: Path, samples: Sequence[dict[str, Any]]) -> None:
    """NNCF post-training static int8 quantization of the ONNX graph for OpenVINO, written as target (+ .bin).

    ModelType.TRANSFORMER: SmoothQuant moves activation outliers into the weights before the activation ranges
    are measured on `samples`; the default preset for it is MIXED (symmetric weights, asymmetric activations).
    Layers left unquantized keep fp32 weights (compress_to_fp16=False: OpenVINO would store them as fp16).
    """
    import contextlib
    import sys

    openvino = import_without_telemetry("openvino")
    nncf = import_without_telemetry("nncf")
    nncf.set_log_level(logging.ERROR)
    with contextlib.redirect_stdout(sys.stderr):  # its progress bars; stdout carries results only
        quantized = nncf.quantize(openvino.Core().read_model(str(source)), nncf.Dataset(list(samples)),
                                  model_type=nncf.ModelType.TRANSFORMER, subset_size=len(samples))
    openvino.save_model(quantized, str(target), compress_to_fp16=False)


def _write_info(folder: Path, display_name: str, backend: str, variant: str | None,
                calibration: Sequence[str] | None = None) -> None:
    from importlib import metadata

    versions = {}
    for package in ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime", "openvino", "nncf"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    info = {"model": display_name, "backend": backend, "opset": ONNX_OPSET, "export_format": EXPORT_FORMAT,
            "created": time.strftime("%Y-%m-%d %H:%M:%S"), "versions": versions,
            "quantization": variant if backend == "onnx-int8" else None}
    if backend == "openvino-int8":
        info["calibration"] = {"texts": len(calibration or []), "fingerprint": texts_fingerprint(calibration or [])}
    (folder / INFO_FILE).write_text(json.dumps(info, indent=1, sort_keys=True), encoding="utf-8")


# ----------------------------------------------------------------------------- running

def _transformer(model: Any) -> Any:
    """The first module of a SentenceTransformer, which must be its Hugging Face transformer."""
    first = model[0]
    if not hasattr(first, "auto_model") or not hasattr(first, "tokenizer"):
        raise BackendError(f"the embedding model's first module is a {type(first).__name__}, not a Hugging Face "
                           f"transformer; only such models run on the onnx backends (use EMBEDDING_BACKEND 'torch')")
    return first


def _tokenizer_inputs(transformer: Any) -> list[str]:
    return list(getattr(transformer.tokenizer, "model_input_names", MODEL_INPUTS[:2]))


def _onnx_runner(path: Path) -> tuple[Any, list[str]]:
    """(run, input names) of an ONNX Runtime session; run(feeds) returns last_hidden_state as numpy."""
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()
    # Same thread count as torch (which honours OMP_NUM_THREADS and torch.set_num_threads), so backends compare fairly.
    options.intra_op_num_threads = torch.get_num_threads()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(feeds: dict[str, Any]) -> Any:
        return session.run(["last_hidden_state"], feeds)[0]

    return run, [i.name for i in session.get_inputs()]


def row_jobs(mask: Any, rows_per_job: int, width_step: int = 1, max_width: int | None = None) -> list[tuple[Any, int]]:
    """A padded batch's rows as jobs of `rows_per_job` (the last may hold fewer): (row indices, width), longest
    row first (ties in row order). Width: the job's longest row, counted in its attention `mask`, where every row is
    right-padded (BERT tokenizers pad so), rounded up to a multiple of `width_step` but not past `max_width` (or the
    batch's width when None), so that few shapes recur; else the batch's width, since cutting columns would cut a
    left-padded row.
    """
    import numpy as np

    mask = np.asarray(mask) != 0
    lengths, width = mask.sum(axis=1), mask.shape[1]
    right_padded = np.array_equal(mask, np.arange(width) < lengths[:, None])
    order = np.argsort(-lengths, kind="stable")
    step, limit = max(1, width_step), max(width, max_width or 0)
    jobs = []
    for start in range(0, len(order), max(1, rows_per_job)):
        rows = order[start:start + max(1, rows_per_job)]
        longest = max(1, int(lengths[rows].max()))
        jobs.append((rows, max(longest, min(-(-longest // step) * step, limit)) if right_padded else width))
    return jobs


def _openvino_runner(path: Path, streams: int = OPENVINO_STREAMS, waiting: Any = None,
                     job_rows: int = OPENVINO_JOB_ROWS, f32_steps: bool = False, width_step: int | None = None,
                     max_width: int | None = None) -> tuple[Any, list[str]]:
    """(run, input names) of an OpenVINO model compiled for the CPU with torch's thread count in up to `streams`
    streams; run(feeds) computes a batch's rows in `row_jobs` (each job at its own padded width, on whichever stream
    is free) and returns last_hidden_state in row order, zero past each job's width. A row's vector depends on the
    rows of its job, never on the stream count or which stream ran it (tests/test_embeddings.py).
    `waiting`: a threading.local; once a batch's jobs are queued, run calls the first callable of the calling
    thread's `waiting.queue`, if any (one per batch), instead of only waiting.
    `f32_steps`: run a quantized model's steps in f32 (OPENVINO_F32_STEPS), not with int8 kernels.
    `width_step`, `max_width`: a job's width is rounded up to a multiple of `width_step` (OPENVINO_JOB_WIDTH_STEP
    when None) up to `max_width` (see `row_jobs`); columns past the batch's width are masked-out zeros."""
    import numpy as np
    import torch

    step = OPENVINO_JOB_WIDTH_STEP if width_step is None else width_step

    openvino = import_without_telemetry("openvino")
    threads = torch.get_num_threads()
    streams = max(1, min(streams, threads))
    config = {**OPENVINO_CONFIG, **(OPENVINO_F32_STEPS if f32_steps else {}), "NUM_STREAMS": streams,
              "INFERENCE_NUM_THREADS": threads}
    compiled = openvino.Core().compile_model(str(path), "CPU", config)
    # Plain requests, no completion callback: a callback needs the GIL, which a caller's waiting work (a Chroma
    # write) holds for its whole call, and the stream would stand still until it returned.
    requests, output, lock = [compiled.create_infer_request() for _ in range(OPENVINO_QUEUED_JOBS)], \
        compiled.outputs[0], threading.Lock()

    def run(feeds: dict[str, Any]) -> Any:
        first = next(iter(feeds.values()))
        jobs = row_jobs(feeds.get("attention_mask", np.ones(first.shape, dtype=np.int64)), job_rows, step, max_width)
        out = None
        queue = getattr(waiting, "queue", None)
        with lock:  # the requests reuse their buffers: calls from two threads would share them
            for start in range(0, len(jobs), len(requests)):  # one round for a batch of up to 64 rows
                this_round = list(zip(requests, jobs[start:start + len(requests)]))
                try:
                    for request, (rows, width) in this_round:
                        request.start_async({name: _job_input(value, rows, width) for name, value in feeds.items()})
                    if queue and start == 0:
                        queue.popleft()()
                finally:  # also after Ctrl-C: a request left running would refuse the next call
                    for request, _ in this_round:
                        request.wait()
                for request, (rows, width) in this_round:
                    hidden = request.get_tensor(output).data
                    if out is None:
                        out = np.zeros((len(first), first.shape[1], hidden.shape[-1]), dtype=hidden.dtype)
                    out[rows, :width] = hidden[:, :first.shape[1]]  # a copy: the request reuses its buffer
        return out

    return run, [i.get_any_name() for i in compiled.inputs]


def _job_input(value: Any, rows: Any, width: int) -> Any:
    """One input of a job: its rows, cut or padded with zeros (masked out, like BERT's [PAD]) to `width` columns."""
    import numpy as np

    part = value[rows, :width]
    if part.shape[1] < width:
        part = np.pad(part, ((0, 0), (0, width - part.shape[1])))
    return np.ascontiguousarray(part)


def _runtime_encoder(run: Any, input_names: list[str], config: Any):
    """A torch module that answers the transformer's forward call with `run` (ONNX Runtime or OpenVINO)."""
    import numpy as np
    import torch

    class RuntimeEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = config  # sentence-transformers reads the config (dimension, hidden states flag)
            self.input_names = input_names

        @property
        def device(self) -> torch.device:
            return torch.device("cpu")

        def forward(self, **features: torch.Tensor) -> dict[str, torch.Tensor]:
            feeds = {n: features[n].detach().cpu().numpy().astype(np.int64) for n in self.input_names}
            return {"last_hidden_state": torch.from_numpy(run(feeds))}

    return RuntimeEncoder()


def use_backend(model: Any, display_name: str, backend: str, cache: Path | None = None,
                calibration: Sequence[str] | None = None) -> Any:
    """Make a loaded torch SentenceTransformer run its transformer on `backend`; returns the same object.

    "torch" leaves it as it is; "openvino-int8" needs its `calibration` texts (see `prepare`). The tokenizer,
    pooling and normalization stay sentence-transformers' own.
    The model's EXPORT_ATTRIBUTE then names the export it runs (see `export_name`).
    """
    if check_backend(backend) == "torch":
        setattr(model, EXPORT_ATTRIBUTE, "torch")
        return model
    path = prepare(model, display_name, backend, cache, calibration)
    suffix = runtime_suffix(backend)
    setattr(model, EXPORT_ATTRIBUTE, path.parent.name + suffix)
    transformer = _transformer(model)
    runtime, needs = ("OpenVINO", OPENVINO_REQUIREMENTS) if backend == "openvino-int8" else \
        ("ONNX Runtime", EXPORT_REQUIREMENTS)
    waiting = threading.local()  # the caller's work for OpenVINO's wait (`wait_work`)
    try:
        run, input_names = _openvino_runner(path, waiting=waiting, f32_steps=bool(suffix),
                                            max_width=getattr(transformer, "max_seq_length", None)) \
            if backend == "openvino-int8" else _onnx_runner(path)
    except Exception as exc:  # noqa: BLE001
        raise BackendError(f"{runtime} could not load the {backend} export of embedding model {display_name!r} "
                           f"({path}): {type(exc).__name__}: {exc}; delete that folder to re-export, or install "
                           f"{needs}") from exc
    if backend == "openvino-int8":
        setattr(model, WAIT_WORK_ATTRIBUTE, waiting)
    transformer.model = _runtime_encoder(run, input_names, transformer.auto_model.config)  # torch weights freed
    transformer.model_forward_params = set(input_names)
    transformer.unpad_inputs = False  # flattened (unpadded) batches are a torch flash-attention path only
    return model


def wait_work(embeddings: Any) -> Any:
    """The calling thread's queue of work that a LangChain HuggingFaceEmbeddings on OpenVINO does while its model
    computes (a collections.deque of callables, one taken per batch), or None where the backend has no such wait.

    The forward pass keeps both cores busy without the GIL, so a caller's own GIL-bound work (a Chroma write)
    done in that wait costs little wall time, and done in a thread of its own it would hold up the embedding.
    """
    import collections

    waiting = getattr(getattr(embeddings, "_client", None), WAIT_WORK_ATTRIBUTE, None)
    if waiting is None:
        return None
    if not hasattr(waiting, "queue"):
        waiting.queue = collections.deque()
    return waiting.queue


@contextlib.contextmanager
def runtime_pooling_threads(embeddings: Any) -> Iterator[None]:
    """One torch thread inside the block when `embeddings` runs on ONNX Runtime or OpenVINO (their thread counts
    are fixed when loaded); torch then only pools and normalizes small arrays, and its idle OpenMP threads would
    spin on the cores the forward pass needs (2% of a FinanceBench build's CPU time in libgomp)."""
    export = export_name(embeddings)
    if export is None or export == "torch":
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def export_name(embeddings: Any) -> str | None:
    """The export a LangChain HuggingFaceEmbeddings runs: "torch", "onnx", "onnx-int8-avx512_vnni",
    "openvino-int8-<calibration>" (with OPENVINO_F32_SUFFIX where its steps run in f32); None if it was not set up
    by `attach`/`use_backend`.

    Two int8 exports of one model differ by CPU family, calibration or kernels; an index records which one made it.
    """
    return getattr(getattr(embeddings, "_client", None), EXPORT_ATTRIBUTE, None)


def attach(embeddings: Any, display_name: str, backend: str, cache: Path | None = None,
           calibration: Sequence[str] | None = None) -> Any:
    """`use_backend` on the SentenceTransformer inside a LangChain HuggingFaceEmbeddings; returns `embeddings`."""
    client = getattr(embeddings, "_client", None)
    if client is None:
        raise BackendError(f"{type(embeddings).__name__} has no _client SentenceTransformer (langchain-huggingface "
                           f"changed?); the {backend!r} backend cannot be attached, use 'torch'")
    use_backend(client, display_name, backend, cache, calibration)
    return embeddings
