"""``tracelens demo`` with the tiny real vLLM engine instead of the simulated model.

Needs the vLLM venv and model of ``scripts/test-vllm.sh``; the plain suite skips it.  Run:
``TRACELENS_VLLM_MODEL=.cache/tiny-llama .venv-vllm/bin/python -m pytest tests/test_demo_vllm.py``
(about a minute: the engine takes 30-40 s to start on two cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from tracelens.api import analyze, load_spans
from tracelens.schema import attribute_dict

pytestmark = [pytest.mark.vllm, pytest.mark.system]
ROOT = Path(__file__).resolve().parent.parent


def _model_dir(factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("TRACELENS_VLLM_MODEL")
    if given and (Path(given) / "config.json").is_file():
        return Path(given)
    out = factory.mktemp("tiny-llama") / "model"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True
    )
    return out


def test_demo_uses_the_real_engine_and_its_phase_spans(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TRACELENS_VLLM_MODEL"] = str(_model_dir(tmp_path_factory))
    out = tmp_path / "spans.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "tracelens", "demo", "--file", str(out), "--requests", "4",
         "--concurrency", "2", "--seed", "2"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "real vLLM engine" in done.stdout and "SIMULATED" not in done.stdout
    rows = load_spans([out]).spans.to_pylist()
    # Only the agent's traces: vLLM's start-up is not traced into them.
    assert sorted(r["name"] for r in rows if r["parent_span_id"] is None) == ["handle_request"] * 4
    by_id = {r["span_id"]: r for r in rows}
    chats = [r for r in rows if r["name"] == "chat"]
    assert chats
    for chat in chats:
        attrs = attribute_dict(chat["attributes"] or [], chat["json_attributes"])
        assert attrs["tracelens.demo.simulated"] is False
        assert attrs["gen_ai.provider.name"] == "vllm"
        assert attrs["gen_ai.usage.output_tokens"] >= 1
    engine_calls = [r for r in rows if r["name"].startswith("text_completion ")]
    assert len(engine_calls) == len(chats)
    assert all(by_id[r["parent_span_id"]]["name"] == "chat" for r in engine_calls)
    phases = Counter(
        r["name"]
        for r in rows
        if by_id.get(r["parent_span_id"] or "", {}).get("name", "").startswith("text_completion ")
    )
    assert phases == {
        "vllm.queue": len(chats),
        "vllm.prefill": len(chats),
        "vllm.decode": len(chats),
    }
    share = analyze([out]).to_dict()["summary"]["critical_path_share"]
    assert share["gpu"] > 0
