"""Runs lmms-eval's own evaluator on geosleuth's shipped task folder with a tiny local model.

Executed by test_lmms_eval.py in a subprocess whose PYTHONPATH holds .lmms-deps (lmms-eval pins
torch 2.14, so it is kept out of the shared venv). argv[1] is a JSON object: ``tasks``,
``include_path`` and ``answers`` (the model's answer for each photo, keyed by the photo's red
channel). The model is registered in lmms-eval's model registry and answers by looking at the
image lmms-eval hands it through the task's ``doc_to_visual``; it prints results as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from lmms_eval.models.registry_v2 import ModelManifest

MODEL = "geosleuth_pixel_reader"
MANIFEST = ModelManifest(model_id=MODEL, simple_class_path="lmms_runner.PixelReader")
"""What a plugin's ``lmms_eval.models`` entry point hands lmms-eval's model registry."""


class PixelReader(lmms):
    """Reads the photo's top-left pixel and answers what the test scripted for that colour."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.answers: dict[str, str] = json.loads(os.environ["GEOSLEUTH_TEST_ANSWERS"])
        self.prompts: list[str] = []

    def generate_until(self, requests: list[Instance]) -> list[str]:
        out = []
        for request in requests:
            context, _gen_kwargs, doc_to_visual, doc_id, task, split = request.args
            visuals = doc_to_visual(self.task_dict[task][split][doc_id])
            # the red channel to the nearest multiple of 40 (JPEG may shift a solid colour by a step)
            red = str(40 * round(visuals[0].getpixel((0, 0))[0] / 40)) if visuals else "none"
            self.prompts.append(context)
            out.append(self.answers.get(red, ""))
        return out

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError("a geolocation task only generates")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError("a geolocation task only generates")


def main() -> None:
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.models import MODEL_REGISTRY_V2
    from lmms_eval.tasks import TaskManager

    spec = json.loads(sys.argv[1])
    os.environ["GEOSLEUTH_TEST_ANSWERS"] = json.dumps(spec["answers"])
    MODEL_REGISTRY_V2.register_manifest(
        ModelManifest(model_id=MODEL, simple_class_path="lmms_runner.PixelReader")
    )
    results = simple_evaluate(
        model=MODEL,
        tasks=spec["tasks"],
        task_manager=TaskManager(include_path=spec["include_path"]),
        batch_size=1,
        device="cpu",
        log_samples=True,
    )
    samples = {
        task: [{"doc_id": s["doc_id"], "target": s["target"], "resps": s["resps"]} for s in rows]
        for task, rows in (results.get("samples") or {}).items()
    }
    print(json.dumps({"results": results["results"], "samples": samples}, default=str))


if __name__ == "__main__":
    main()
