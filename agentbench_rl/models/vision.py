"""Vision-language models: Qwen2.5-VL and Qwen2-VL through transformers' own model classes and
image processor, and ``tiny-vl``, a random-initialised Qwen2.5-VL built on the spot for the CPU.

A frame reaches the model the way the Qwen-VL processors put it there: the chat template writes
``<|vision_start|><|image_pad|><|vision_end|>`` for each image part, the image processor turns
the frame into patches and its ``image_grid_thw``, and each ``<|image_pad|>`` is expanded to
``t*h*w / merge_size**2`` copies, the number of vision tokens the merger emits. We do that
expansion here rather than through ``Qwen2_5_VLProcessor`` because the processor's constructor
requires the video processor, which requires torchvision (not in the ``train`` extra); the
arithmetic is the processor's own (``processing_qwen2_5_vl.py``).

Prompt token ids that carry images are :class:`ImagePromptIds`: a list of ids with the pixel
values and grid beside them, so the trainer stores, packs and re-scores them like text ids;
:func:`vision_inputs` turns a batch of them into the model's extra inputs (pixel values, grids,
and the 3-D M-RoPE position ids from the model's own ``get_rope_index``).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.models.tiny import TinyVLConfig, build_tokenizer

VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = (
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
#: The Qwen2-VL chat template's shape (user turns only; image parts before or after text).
TINY_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ImagePromptIds(list[int]):
    """Prompt token ids (image pads already expanded) with the images they show.

    Attributes:
        pixel_values: the image processor's patches of every image, (patches, dim).
        image_grid_thw: (images, 3) temporal, height and width patch counts.
        images: the frames themselves (vLLM runs its own image processor on them).
        image_token_id: the ``<|image_pad|>`` id.
    """

    def __init__(
        self,
        ids: Sequence[int],
        pixel_values: torch.Tensor,
        image_grid_thw: torch.Tensor,
        images: Sequence[Any],
        image_token_id: int,
    ) -> None:
        super().__init__(ids)
        self.pixel_values = pixel_values
        self.image_grid_thw = image_grid_thw
        self.images = tuple(images)
        self.image_token_id = image_token_id

    def collapsed(self) -> list[int]:
        """The ids with each image's run of pads back to one pad, as the chat template wrote
        them (vLLM expands placeholders itself against the images it is given).

        Example:
            >>> ImagePromptIds([1, 9, 9, 9, 2], torch.zeros(0), torch.zeros(0), [], 9).collapsed()
            [1, 9, 2]
        """
        pad = self.image_token_id
        return [t for k, t in enumerate(self) if t != pad or k == 0 or self[k - 1] != pad]

    def image_spans(self) -> list[tuple[int, int]]:
        """``(first, end)`` index range of each image's tokens: its run of pads with the token
        either side (``<|vision_start|>`` and ``<|vision_end|>``, as the chat template writes
        them).

        Example:
            >>> ids = ImagePromptIds([1, 5, 9, 9, 6, 2], torch.zeros(0), torch.zeros(0), [], 9)
            >>> ids.image_spans()
            [(1, 5)]
        """
        spans, k = [], 0
        while k < len(self):
            if self[k] != self.image_token_id:
                k += 1
                continue
            end = k
            while end < len(self) and self[end] == self.image_token_id:
                end += 1
            spans.append((max(k - 1, 0), min(end + 1, len(self))))
            k = end
        return spans

    def last(self, max_tokens: int) -> list[int]:
        """The last ``max_tokens`` ids, as a text prompt is cut, but never inside an image: an
        image the cut would split is dropped whole (pads, start and end tokens, pixel values
        and grid), so the prompt may come out shorter than ``max_tokens``. A plain list when no
        image is left.

        Example (ids 5 and 6 open and close the image, 9 is its pad):
            >>> grid = torch.tensor([[1, 2, 2]])
            >>> ids = ImagePromptIds([1, 5, 9, 9, 6, 2], torch.zeros(4, 1), grid, ["frame"], 9)
            >>> ids.last(5).images, ids.last(4)
            (('frame',), [2])
        """
        if len(self) <= max_tokens:
            return self
        cut = len(self) - max_tokens
        spans = self.image_spans()
        for first, end in spans:
            if first < cut < end:
                cut = end  # the cut falls inside this image: drop it whole
        kept = [n for n, (first, _) in enumerate(spans) if first >= cut]
        if not kept:
            return list(self[cut:])
        # images are cut from the front, so the kept ones are the last; their patches likewise
        patches = int(self.image_grid_thw[: kept[0]].prod(dim=1).sum())
        return ImagePromptIds(
            self[cut:],
            self.pixel_values[patches:],
            self.image_grid_thw[kept[0] :],
            self.images[kept[0] :],
            self.image_token_id,
        )


def is_vision_language(model: Any) -> bool:
    """Whether ``model`` takes images (its config has a vision tower)."""
    return getattr(model.config, "vision_config", None) is not None


def vision_token_ids(model: Any) -> list[int]:
    """The ids of the vision placeholder tokens (image and video pads, vision start and end):
    a policy must never generate them, since the model reads them as slots for image features.
    Empty for a text model."""
    if not is_vision_language(model):
        return []
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return [int(getattr(model.config, name)) for name in names if hasattr(model.config, name)]


def image_token_count(image_processor: Any, height: int, width: int) -> int:
    """How many ``<|image_pad|>`` tokens a ``height`` x ``width`` frame costs.

    Example (the tiny-vl processor and visual Sokoban's 96x96 frame: resized to 84x84, 6x6
    patches of 14 pixels, merged 2x2):
        >>> from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        ...     Qwen2VLImageProcessorPil)
        >>> image_token_count(Qwen2VLImageProcessorPil(), 96, 96)
        9
    """
    grid = image_processor(images=[np.zeros((height, width, 3), np.uint8)], return_tensors="pt")
    merge = int(getattr(image_processor, "merge_size", 2))
    return int(grid["image_grid_thw"][0].prod()) // merge**2


class FramePixels:
    """The image processor's pixel values and grid per distinct frame, computed once and shared.

    A rollout shows the same frame many times (a group's trajectories start from one level,
    states are reached again), and each row keeps its prompt's pixel values until the PPO
    update: as a copy per row that is 36 patches x 1176 floats, 169 KB, for a 96x96 Sokoban frame
    (six times the frame's own 27 KB). Here rows showing the same frame hold one tensor. Entries
    are weak references: a frame's tensor lives as long as some row holds it, so the cache
    itself keeps nothing alive.

    Example:
        >>> from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        ...     Qwen2VLImageProcessorPil)
        >>> pixels = FramePixels(Qwen2VLImageProcessorPil())
        >>> frame = np.zeros((96, 96, 3), np.uint8)
        >>> first, grid = pixels([frame])
        >>> second, _ = pixels([frame.copy()])
        >>> first is second, tuple(first.shape), grid.tolist()
        (True, (36, 1176), [[1, 6, 6]])
    """

    def __init__(self, image_processor: Any) -> None:
        self.image_processor = image_processor
        self.merge_size = int(getattr(image_processor, "merge_size", 2))
        self._pixels: weakref.WeakValueDictionary[str, torch.Tensor] = weakref.WeakValueDictionary()
        self._grids: dict[str, torch.Tensor] = {}

    def _one(self, frame: Any) -> tuple[torch.Tensor, torch.Tensor]:
        array = np.ascontiguousarray(np.asarray(frame))
        key = hashlib.blake2b(
            f"{array.shape}{array.dtype}".encode() + array.tobytes(), digest_size=16
        ).hexdigest()
        pixels, grid = self._pixels.get(key), self._grids.get(key)
        if pixels is None or grid is None:
            processed = self.image_processor(images=[array], return_tensors="pt")
            pixels, grid = processed["pixel_values"], processed["image_grid_thw"]
            self._pixels[key], self._grids[key] = pixels, grid
            weakref.finalize(pixels, self._forget, key, grid)
        return pixels, grid

    def _forget(self, key: str, grid: torch.Tensor) -> None:
        """A frame's tensor died: drop its grid (unless the frame has a newer entry)."""
        if self._grids.get(key) is grid:
            del self._grids[key]

    def __call__(self, frames: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The pixel values (patches, dim) and grids (images, 3) of ``frames``, in order (the
        shared tensor itself for one frame; the processor treats each image on its own, so
        several frames concatenate their separate results)."""
        parts = [self._one(frame) for frame in frames]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([p for p, _ in parts]), torch.cat([g for _, g in parts])


def encode_with_images(
    tokenizer: Any, pixels: FramePixels, text: str, images: Sequence[Any]
) -> ImagePromptIds:
    """Token ids of ``text`` (one ``<|image_pad|>`` per image, as the chat template writes it)
    with each pad expanded to its image's token count, and the images' pixel values."""
    pixel_values, grids = pixels(images)
    pieces = text.split(IMAGE_PAD)
    if len(pieces) - 1 != len(images):
        raise ValueError(
            f"the prompt has {len(pieces) - 1} image placeholders for {len(images)} images"
        )
    expanded = pieces[0]
    for grid, piece in zip(grids, pieces[1:], strict=True):
        expanded += IMAGE_PAD * (int(grid.prod()) // pixels.merge_size**2) + piece
    ids = tokenizer(expanded, add_special_tokens=False)["input_ids"]
    pad_id = int(tokenizer.convert_tokens_to_ids(IMAGE_PAD))
    return ImagePromptIds(ids, pixel_values, grids, images, pad_id)


def pixel_bytes(rows: Sequence[Sequence[int]]) -> int:
    """Bytes of pixel values that ``rows`` hold, each shared tensor counted once.

    Example:
        >>> shared = torch.zeros(36, 1176)
        >>> rows = [ImagePromptIds([9], shared, torch.zeros(0), [], 9) for _ in range(3)]
        >>> pixel_bytes([*rows, [1, 2]]) == 36 * 1176 * 4
        True
    """
    storages: dict[int, int] = {}
    for row in rows:
        if isinstance(row, ImagePromptIds):
            storage = row.pixel_values.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def vllm_prompt(ids: Sequence[int]) -> dict[str, Any]:
    """One prompt as ``vllm.LLM.generate`` takes it: token ids, and for a prompt with images
    the ids with one placeholder per image plus ``multi_modal_data`` (PIL images), which is
    what vLLM's multimodal processor expects (it expands the placeholders itself; handing it
    expanded ids would expand them twice).

    Example:
        >>> vllm_prompt([1, 2])
        {'prompt_token_ids': [1, 2]}
    """
    if not isinstance(ids, ImagePromptIds):
        return {"prompt_token_ids": list(ids)}
    from PIL import Image

    frames = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in ids.images]
    return {"prompt_token_ids": ids.collapsed(), "multi_modal_data": {"image": frames}}


def stack_images(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The pixel values and grids of a batch of prompt rows, in row order (``None`` when no
    row shows an image)."""
    with_images = [row for row in rows if isinstance(row, ImagePromptIds)]
    if not with_images:
        return None, None
    return (
        torch.cat([row.pixel_values for row in with_images]),
        torch.cat([row.image_grid_thw for row in with_images]),
    )


def vision_inputs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pixel_values: torch.Tensor | None,
    image_grid_thw: torch.Tensor | None,
) -> dict[str, Any]:
    """The extra forward inputs of rows that show images: pixel values, grids, the
    multimodal token types and the 3-D (M-RoPE) position ids of ``input_ids`` (computed by the
    model's own ``get_rope_index``, padding-aware). Empty when there is no image."""
    if pixel_values is None or image_grid_thw is None:
        return {}
    device = input_ids.device
    image_token = int(model.config.image_token_id)
    token_types = (input_ids == image_token).int()
    image_grid_thw = image_grid_thw.to(device)
    positions, _ = model.model.get_rope_index(
        input_ids,
        mm_token_type_ids=token_types,
        image_grid_thw=image_grid_thw,
        attention_mask=attention_mask,
    )
    dtype = next(model.parameters()).dtype
    return {
        "pixel_values": pixel_values.to(device=device, dtype=dtype),
        "image_grid_thw": image_grid_thw,
        "mm_token_type_ids": token_types,
        "position_ids": positions,
    }


def vl_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """The ``tiny`` byte-level BPE tokenizer trained on ``texts``, with the vision tokens and a
    Qwen-VL chat template."""
    tokenizer = build_tokenizer(texts, vocab_size)
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD]}
    )
    tokenizer.chat_template = TINY_VL_CHAT_TEMPLATE
    return tokenizer


def qwen25_vl_config(
    tokenizer: Any,
    text: dict[str, Any],
    vision: dict[str, Any],
    vocab_size: int | None = None,
    mrope_section: Sequence[int] | None = None,
) -> Any:
    """A ``Qwen2_5_VLConfig`` for ``tokenizer``'s special tokens: ``text`` holds the language
    model's sizes (``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, and optionally ``max_position_embeddings``,
    ``rope_theta``, ``tie_word_embeddings``), ``vision`` the vision tower's (Qwen2.5-VL's vision
    config keys). ``vocab_size`` defaults to the tokenizer's; ``mrope_section`` (the rotary
    half-dimension's temporal, height and width sections) to a split in thirds."""
    from transformers import Qwen2_5_VLConfig

    token_id = tokenizer.convert_tokens_to_ids
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    half = head_dim // 2
    sections = list(mrope_section or [half - 2 * (half // 3), half // 3, half // 3])
    tie = text.get("tie_word_embeddings", True)
    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": vocab_size or len(tokenizer),
            **{key: text[key] for key in _TEXT_SIZES},
            "max_position_embeddings": text.get("max_position_embeddings", 2048),
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": text.get("rope_theta", 10000.0),
                "mrope_section": sections,
            },
            "tie_word_embeddings": tie,
            "bos_token_id": tokenizer.eos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
        },
        vision_config={"out_hidden_size": text["hidden_size"], **vision},
        image_token_id=token_id(IMAGE_PAD),
        video_token_id=token_id(VIDEO_PAD),
        vision_start_token_id=token_id(VISION_START),
        vision_end_token_id=token_id(VISION_END),
        tie_word_embeddings=tie,
    )


_TEXT_SIZES = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)


def build_tiny_vl(texts: Iterable[str], config: TinyVLConfig, seed: int) -> tuple[Any, Any, Any]:
    """The tiny-vl model, its tokenizer (trained on the env's text, with the vision tokens and a
    Qwen-VL chat template) and a Qwen2-VL image processor (default settings), all built here."""
    from transformers import Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    tokenizer = vl_tokenizer(texts, config.vocab_size)
    model_config = qwen25_vl_config(
        tokenizer,
        text={
            "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "num_hidden_layers": config.layers,
            "num_attention_heads": config.heads,
            "num_key_value_heads": config.kv_heads,
        },
        vision={
            "depth": config.vision_depth,
            "hidden_size": config.vision_hidden_size,
            "intermediate_size": config.vision_intermediate_size,
            "num_heads": config.vision_heads,
            "fullatt_block_indexes": [config.vision_depth - 1],
        },
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_from(seed, "init") % 2**31)
        model = Qwen2_5_VLForConditionalGeneration(model_config)
    return model, tokenizer, Qwen2VLImageProcessorPil()


def load_image_processor(name_or_path: str) -> Any | None:
    """The image processor saved with a vision-language model (``None`` for a text model: no
    ``preprocessor_config.json`` in a local folder, or a hub model whose config has no vision
    tower)."""
    from transformers import AutoConfig, AutoImageProcessor

    folder = Path(name_or_path)
    if folder.is_dir():
        if not (folder / "preprocessor_config.json").is_file():
            return None
    elif getattr(AutoConfig.from_pretrained(name_or_path), "vision_config", None) is None:
        return None
    return AutoImageProcessor.from_pretrained(name_or_path)


def load_vision_model(name_or_path: str, dtype: torch.dtype) -> Any:
    """A vision-language model by hub id or folder through transformers' image-text-to-text
    auto class (``Qwen2_5_VLForConditionalGeneration`` for Qwen2.5-VL, ``Qwen2VL...`` for
    Qwen2-VL)."""
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(name_or_path, dtype=dtype)
