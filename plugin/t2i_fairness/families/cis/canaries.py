"""CIS's canary: a named component left out of every multi-component prompt (``drop_component``).

A component C holds the CIS prompts (``a photo of a X, a Y, and a Z.``) that name C among at least
two components (a one-component prompt would be left empty); C is matched case-insensitively.
"""

from __future__ import annotations

from t2i_fairness.generators.canary import Canary, CanaryInfo, CanarySlice, SliceKind, split_gate

__all__ = ["CANARIES", "COMPONENT", "DropComponent"]


def component_role(value: str, gate_id: str) -> str:
    """The role of a gate for a component slice (see :meth:`~t2i_fairness.generators.canary.CanarySlice.gate_role`).

    Example:
        >>> [component_role("macaw", g) for g in ("test_cis_component_rate_floor", "test_cis[k1]", "test_cis[k8]")]
        ['slice', 'other', 'aggregate']
    """
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
    """CIS: a named component is left out of every multi-component prompt that names it.

    ``A photo of a crab, a macaw, and a steel drum.`` with component ``macaw`` is generated as
    ``A photo of a crab, and a steel drum.`` (re-rendered by :func:`t2i_fairness.metrics.cis.render_prompt`
    in the prompt's own style),
    with the same seed. One-component prompts are left alone (nothing would remain).

    Args:
        inner: the generator to wrap.
        component: the component name (matched case-insensitively).

    Raises:
        ValueError: an empty component name.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> canary = DropComponent(ProceduralGenerator(), "macaw")
        >>> canary.rewrite("A photo of a crab, a macaw, and a steel drum.")
        'A photo of a crab, and a steel drum.'
        >>> canary.rewrite("a photo of a macaw.") is None
        True
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


#: CIS's canaries (listed on :data:`~t2i_fairness.families.cis.FAMILY`).
CANARIES: tuple[CanaryInfo, ...] = (
    CanaryInfo("drop_component", "component", "a CIS component name, e.g. crab or 'steel drum'", "none",
               "CIS prompts naming the component are generated without it", build=_build),
)
