"""CIS's canaries: a named component left out of every multi-component prompt (``drop_component``),
and the component named at one position left out of a share of the images (``drop_position``, a
planted order effect that only the order test sees as its slice).
"""

from __future__ import annotations

from t2i_fairness.generators.canary import (
    CANARY_VERSION, Canary, CanaryInfo, CanarySlice, SliceKind, fraction, split_gate, stable_int,
)

__all__ = ["CANARIES", "COMPONENT", "POSITION", "DropComponent", "DropPosition"]


def component_role(value: str, gate_id: str) -> str:
    """The role of a gate for a component slice (see :meth:`~t2i_fairness.generators.canary.CanarySlice.gate_role`)."""
    name, params = split_gate(gate_id)
    if name == "test_cis_component_rate_floor":
        return "slice"
    if name in ("test_cis_drop_per_component", "test_cis_order_invariance"):
        return "aggregate"
    if name == "test_cis" and params and params[0] != "k1":
        return "aggregate"
    return "other"


COMPONENT = SliceKind("component", component_role, "component {value}")


class DropComponent(Canary):
    """CIS: a named component (any case) is left out of every multi-component prompt that names it.

    The prompt is re-rendered in its own style (:func:`t2i_fairness.metrics.cis.render_prompt`) and
    generated at the same seed; one-component prompts are left alone.

    Raises:
        ValueError: an empty component name.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> DropComponent(ProceduralGenerator(), "macaw").rewrite("A photo of a crab, a macaw, and a steel drum.")
        'A photo of a crab, and a steel drum.'
    """

    name = "drop_component"

    def __init__(self, inner, component: str):
        if not isinstance(component, str) or not component.strip():
            raise ValueError(f"canary {self.name}: component must be a non-empty name (e.g. crab), got {component!r}")
        self.component = component.strip()
        super().__init__(inner, CanarySlice("component", self.component))

    def describe(self) -> str:
        return f"{super().describe()}: CIS prompts naming {self.component!r} are generated without it"

    def rewrite(self, prompt: str) -> str | None:
        """The prompt without the component, or None when the prompt is not in the slice."""
        from t2i_fairness.generators.procedural import read_prompt
        from t2i_fairness.metrics.cis import PROMPT_STYLES, render_prompt

        reading = read_prompt(prompt)
        if reading.family != "cis" or len(reading.components) < 2:
            return None
        kept = [c for c in reading.components if c.casefold() != self.component.casefold()]
        if len(kept) == len(reading.components):
            return None
        # re-rendered in the prompt's own style (the paper's "A photo of ...", or the prototype's lower case)
        style = "prototype" if prompt.startswith(PROMPT_STYLES["prototype"]) else "paper"
        return render_prompt(kept, style=style)

    def targets(self, prompt: str) -> bool:
        return self.rewrite(prompt) is not None

    def _replacement(self, prompt: str, seed: int) -> str | None:
        return self.rewrite(prompt)


def _build(inner, slice_: str, params: dict, multilingual) -> Canary:
    return DropComponent(inner, slice_)


def _position_index(value: str) -> int:
    """``first`` -> 0, ``last`` -> -1, ``n`` -> n - 1."""
    return 0 if value == "first" else -1 if value == "last" else int(value) - 1


def position_role(value: str, gate_id: str) -> str:
    """The role of a gate for a position slice: the order test's slice; CIS_K of the K that have the
    position, and the gates over them, pool it; every other gate never sees a targeted image.

    Example:
        >>> [position_role("last", g) for g in ("test_cis_order_invariance", "test_cis[k1]", "test_cis[k8]")]
        ['slice', 'other', 'aggregate']
    """
    name, params = split_gate(gate_id)
    if name == "test_cis_order_invariance":
        return "slice"
    if name in ("test_cis_drop_per_component", "test_cis_component_rate_floor"):
        return "aggregate"
    if name == "test_cis" and params and params[0][1:].isdigit():
        k = int(params[0][1:])
        return "aggregate" if k >= 2 and _position_index(value) < k else "other"
    return "other"


POSITION = SliceKind("position", position_role, "the component named {value}")
_POSITION_HELP = "a position in the CIS prompts: first, last or a number from 1"


def read_position(value: str) -> str:
    """``first``, ``last`` or a positive number, normalised (a ValueError for anything else)."""
    text = value.strip().lower()
    if text in ("first", "last") or (text.isdigit() and int(text) >= 1):
        return text if not text.isdigit() else str(int(text))
    raise ValueError(f"SLICE {value!r}: {_POSITION_HELP}")


class DropPosition(Canary):
    """CIS: the component named at a position is left out of a share ``p`` of the images (an order effect).

    Each image of a prompt with that position is, with probability ``p`` (hashed from prompt and
    seed), generated without that component at the same seed. The order test's shuffled prompts
    name other components there, so the effect is a position effect.

    Args:
        position: ``first``, ``last`` or a number from 1.
        p: share of the images, in ``(0, 1]`` (default 0.5).

    Raises:
        ValueError: another position, ``p`` outside ``(0, 1]``.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> DropPosition(ProceduralGenerator(), "last", 1.0).rewrite("A photo of a crab, a macaw, and a steel drum.")
        'A photo of a crab, and a macaw.'
    """

    name = "drop_position"

    def __init__(self, inner, position: str = "last", p: float = 0.5):
        self.position = read_position(str(position))
        self.p = fraction(p, f"canary {self.name}: P", low_open=True)
        super().__init__(inner, CanarySlice("position", self.position), f"{self.p:g}")

    def describe(self) -> str:
        return (f"{super().describe()}: CIS prompts of two or more components get, per image with probability "
                f"{self.p:g}, an image without the component named {self.position}")

    def rewrite(self, prompt: str) -> str | None:
        """The prompt without the component at the position, or None when the prompt is not in the slice."""
        from t2i_fairness.generators.procedural import read_prompt
        from t2i_fairness.metrics.cis import PROMPT_STYLES, render_prompt

        reading = read_prompt(prompt)
        at = _position_index(self.position)
        if reading.family != "cis" or len(reading.components) < 2 or at >= len(reading.components):
            return None
        kept = [c for i, c in enumerate(reading.components) if i != at % len(reading.components)]
        style = "prototype" if prompt.startswith(PROMPT_STYLES["prototype"]) else "paper"
        return render_prompt(kept, style=style)

    def targets(self, prompt: str) -> bool:
        return self.rewrite(prompt) is not None

    def _replacement(self, prompt: str, seed: int) -> str | None:
        new = self.rewrite(prompt)
        if new is None:
            return None
        u = stable_int("drop_position", CANARY_VERSION, self.position, prompt, seed) / 2.0**64
        return new if u < self.p else None


def read_share(param: str) -> dict:
    """``P`` in ``(0, 1]`` as the keyword argument of :class:`DropPosition`."""
    return {"p": fraction(param, "P", low_open=True)}


def _build_position(inner, slice_: str, params: dict, multilingual) -> Canary:
    return DropPosition(inner, slice_, **params)


#: CIS's canaries (listed on :data:`~t2i_fairness.families.cis.FAMILY`).
CANARIES: tuple[CanaryInfo, ...] = (
    CanaryInfo("drop_component", "component", "a CIS component name, e.g. crab or 'steel drum'", "none",
               "CIS prompts naming the component are generated without it", build=_build),
    CanaryInfo("drop_position", "position", _POSITION_HELP, "P, the share of images in (0, 1] (default 0.5)",
               "the component named at the position is left out of a share P of the images of CIS prompts",
               build=_build_position, read_slice=read_position, read_param=read_share),
)
