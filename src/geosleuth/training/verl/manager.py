"""geosleuth's reward manager for verl's reward loop (verl ≥ 0.7, ``verl.experimental.reward_loop``).

Load it with::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=GeoSleuthRewardManager
    reward.reward_manager.module.path=pkg://geosleuth.training.verl.manager
    +reward.custom_reward_function.reward_kwargs.reward=step   # or piecewise / spatial / …

It differs from verl's ``naive`` manager + `verl_reward.compute_score` in two ways:

- **Only the policy's own tokens are read.** verl's naive manager decodes the whole response,
  tool responses included, with special tokens skipped (so chat markers vanish and tool text
  reads like the model's). Here each rollout is decoded segment by segment over the tokens
  the policy generated: ``response_mask`` when the batch carries it, otherwise the mask is
  rebuilt from the ChatML turn markers (verl's streaming reward path does not pass
  ``response_mask``): everything from a non-assistant ``<|im_start|>`` to the next turn, and
  every turn header, is excluded. Tool output can never be scored as the answer.
- **Batches are scored vectorised.** verl's reward worker calls ``run_single`` once per
  rollout, all of a chunk concurrently; the calls that arrive together are gathered and
  scored in one `compute_score_batch` call (one parse pass, one NumPy distance pass), and
  `score_batch` scores a whole `DataProto` directly.

``reward_kwargs`` are those of `verl_reward.compute_score` (``reward``, ``reward_params``,
``consistency``); ``extra_info["reward"]`` still picks a reward per row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from geosleuth.training.verl.reward import compute_score_batch

log = logging.getLogger(__name__)

try:
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    HAVE_VERL = True
except ImportError:  # importable without verl, for the decoding helpers and their tests
    RewardManagerBase = object  # type: ignore[assignment, misc]
    HAVE_VERL = False

HEADER_MAX_TOKENS = 6
"""Tokens a ChatML turn header may span (``<|im_start|>`` role ``\\n``)."""


class PolicyDecoder:
    """Decodes the policy-generated parts of responses (batch-decoded in one tokenizer call)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        self.im_start = vocab.get("<|im_start|>")
        self.im_end = vocab.get("<|im_end|>")
        self._warned = False

    def derived_mask(self, ids: np.ndarray) -> np.ndarray:
        """1 for tokens the policy wrote, from the ChatML turn structure of the response."""
        mask = np.ones(len(ids), dtype=bool)
        if self.im_start is None:
            if not self._warned:
                log.warning(
                    "GeoSleuthRewardManager: no response_mask and no ChatML markers in this tokenizer; "
                    "tool output is only excluded where <tool_response> tags delimit it"
                )
                self._warned = True
            return mask
        starts = np.flatnonzero(ids == self.im_start)
        ends = np.flatnonzero(ids == self.im_end) if self.im_end is not None else np.array([], dtype=np.int64)
        for e in ends:  # template glue between a turn's end and the next turn's start
            following = starts[starts > e]
            mask[e + 1 : following[0] if following.size else len(ids)] = False
        for k, s in enumerate(starts):
            header_end = self._header_end(ids, s)
            role = self.tokenizer.decode(ids[s + 1 : header_end].tolist()).strip()
            nxt = starts[k + 1] if k + 1 < len(starts) else len(ids)
            mask[s : header_end if role == "assistant" else nxt] = False
        return mask

    def _header_end(self, ids: np.ndarray, start: int) -> int:
        """Index just past the newline that ends the header opened at ``start``."""
        for j in range(start + 1, min(start + 1 + HEADER_MAX_TOKENS, len(ids))):
            if "\n" in self.tokenizer.decode([int(ids[j])]):
                return j + 1
        return min(start + 2, len(ids))

    def segments(
        self, responses: np.ndarray, valid_lengths: Sequence[int], response_mask: np.ndarray | None
    ) -> list[list[list[int]]]:
        """Per response, the runs of token ids the policy generated."""
        n = len(valid_lengths)
        if n == 0:
            return []
        width = responses.shape[-1]
        inside = np.arange(width)[None, :] < np.asarray(valid_lengths)[:, None]
        if response_mask is not None:
            mask = np.asarray(response_mask).astype(bool) & inside
        else:
            mask = np.zeros((n, width), dtype=bool)
            for i, v in enumerate(valid_lengths):
                mask[i, : int(v)] = self.derived_mask(np.asarray(responses[i][: int(v)]))
        padded = np.zeros((n, width + 2), dtype=np.int8)
        padded[:, 1:-1] = mask
        step = np.diff(padded, axis=1)
        starts, ends = np.argwhere(step == 1), np.argwhere(step == -1)  # row-major: pairs line up
        out: list[list[list[int]]] = [[] for _ in range(n)]
        for (r, a), (_, b) in zip(starts, ends, strict=True):
            out[int(r)].append(responses[r, a:b].tolist())
        return out

    def join(self, rows: Sequence[Sequence[list[int]]]) -> list[str]:
        """Decode every row's segments in one batch call; a row's segments joined by a newline."""
        flat = [seg for row in rows for seg in row]
        decoded = iter(self._decode_batch(flat))
        return ["\n".join(next(decoded) for _ in row) for row in rows]

    def texts(
        self, responses: np.ndarray, valid_lengths: Sequence[int], response_mask: np.ndarray | None
    ) -> list[str]:
        """The policy's own text of each response; segments joined by a newline."""
        return self.join(self.segments(responses, valid_lengths, response_mask))

    def _decode_batch(self, segments: list[list[int]]) -> list[str]:
        """The Rust tokenizer's batch decode where it gives what transformers' decode gives."""
        if not segments:
            return []
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and not getattr(self.tokenizer, "clean_up_tokenization_spaces", False):
            return list(backend.decode_batch(segments, skip_special_tokens=True))
        return list(self.tokenizer.batch_decode(segments, skip_special_tokens=True))


def _plain(value: Any) -> Any:
    """OmegaConf containers to plain Python (reward kwargs come from the Hydra config)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def reward_kwargs(config: Any) -> dict[str, Any]:
    """``reward.custom_reward_function.reward_kwargs`` of a verl config (empty when absent)."""
    reward = config.get("reward") if hasattr(config, "get") else None
    fn = reward.get("custom_reward_function") if reward is not None else None
    kwargs = fn.get("reward_kwargs") if fn is not None else None
    return dict(_plain(kwargs) or {})


_Row = tuple[str, list[list[int]], Any, Any]


def _item(batch: Any, key: str, i: int, default: Any = None) -> Any:
    values = batch.get(key) if hasattr(batch, "get") else None
    if values is None:
        return default
    return values[i]


class GeoSleuthRewardManager(RewardManagerBase):  # type: ignore[misc, valid-type]
    """verl reward-loop manager: policy tokens only, batches scored in one vectorised call."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **kwargs: Any,
    ) -> None:
        if HAVE_VERL:
            super().__init__(config, tokenizer, compute_score)
        else:
            self.config, self.tokenizer, self.compute_score = config, tokenizer, compute_score
        self.kwargs = reward_kwargs(config)
        self.decoder = PolicyDecoder(tokenizer)
        self._pending: list[tuple[_Row, asyncio.Future[dict[str, Any]]]] = []
        self.batch_sizes: list[int] = []  # rows per vectorised call, for logs and tests
        self._step: int | None = None  # verl's global step, when its DataProto carries one

    def _segments(self, data: Any) -> list[list[list[int]]]:
        batch = data.batch
        responses = batch["responses"].cpu().numpy()
        length = responses.shape[-1]
        valid = batch["attention_mask"][:, -length:].sum(dim=-1).cpu().numpy()
        has_mask = "response_mask" in batch.keys()  # noqa: SIM118 - TensorDict refuses `key in td`
        mask = batch["response_mask"].cpu().numpy() if has_mask else None
        return self.decoder.segments(responses, valid.tolist(), mask)

    def decode(self, data: Any) -> list[str]:
        """The policy's own text of every item of a `DataProto`."""
        return self.decoder.join(self._segments(data))

    def _rows(self, data: Any) -> list[_Row]:
        """(data source, policy token segments, ground truth, extra info) per item; decoded in the batch."""
        nt = data.non_tensor_batch
        rows = []
        for i, segments in enumerate(self._segments(data)):
            reward_model = _item(nt, "reward_model", i, {}) or {}
            source = str(_item(nt, "data_source", i, "geosleuth"))
            rows.append(
                (source, segments, reward_model.get("ground_truth"), _item(nt, "extra_info", i, None))
            )
        return rows

    def _score(self, rows: Sequence[_Row], step: int | None = None) -> list[dict[str, Any]]:
        texts = self.decoder.join([r[1] for r in rows])
        infos = compute_score_batch(
            [r[0] for r in rows], texts, [r[2] for r in rows], [r[3] for r in rows], step=step, **self.kwargs
        )
        return [{"reward_score": info["score"], "reward_extra_info": info} for info in infos]

    def score_batch(self, data: Any) -> list[dict[str, Any]]:
        """Every item of a `DataProto`, decoded and scored in one vectorised call."""
        rows = self._rows(data)
        self.batch_sizes.append(len(rows))
        return self._score(rows, _global_step(data))

    async def run_single(self, data: Any) -> dict[str, Any]:
        """verl's per-rollout entry point; concurrent calls are gathered into one batch."""
        # multi-sequence outputs: the last sequence, as verl's naive manager
        row = self._rows(data if len(data) == 1 else data[-1:])[0]
        self._step = _global_step(data) if _global_step(data) is not None else self._step
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((row, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush)  # after every run_single already scheduled has enqueued its row
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(None, self._score, [row for row, _ in pending], self._step)

        def deliver(done: asyncio.Future[list[dict[str, Any]]]) -> None:
            error = done.exception()
            for k, (_, future) in enumerate(pending):
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result()[k])

        task.add_done_callback(deliver)
        self.batch_sizes.append(len(pending))


def _global_step(data: Any) -> int | None:
    """verl's training step from ``DataProto.meta_info["global_steps"]`` (absent: None)."""
    meta = getattr(data, "meta_info", None)
    step = meta.get("global_steps") if isinstance(meta, dict) else None
    return int(step) if isinstance(step, int | float) else None
