"""The layout's cached index tensors are built outside inference mode, whoever asks first.

A served decision (PolicyRunner, under ``torch.inference_mode``) can be the first user of a layout in a process
that trains later (``agentic-ray refine``, a test session): inference tensors in the cache then break backward.
"""

from __future__ import annotations

import torch

from agentic_ray.graph_spec import toy_specs
from agentic_ray.models import packed_action_layout as pal
from agentic_ray.models.skill_argument_functional import PackedActionLayout


def test_indices_first_built_in_inference_mode_are_normal_tensors() -> None:
    pal._group_index.cache_clear()
    pal._used_masks.cache_clear()
    layout = PackedActionLayout.from_action_layout(toy_specs()[1])
    with torch.inference_mode():
        gi = layout.group_index(torch.device("cpu"))
        masks = pal._used_masks(layout, torch.device("cpu"))
    tensors = [t for group in (*gi.pointer, *gi.sets) for t in group] + list(masks)
    assert tensors and not any(t.is_inference() for t in tensors)
