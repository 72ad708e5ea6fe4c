"""Models held only while a gate needs them.

:class:`Resident` is what ``Workbench.scorer`` hands out: a stand-in that rebuilds the scorer on
first use after a release, so releasing really frees it while studies keep the handle.
:func:`still_needed` says which models each role must keep for the gates still to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["ALL", "GateUse", "Resident", "still_needed"]

_PLAIN = (str, int, float, bool, type(None))
ALL = None  # "every model": a gate whose needs are not declared


class Resident:
    """A scorer model that can be released and is built again on its next use (its plain attributes
    are read without a rebuild).

    Args:
        load: ``load() -> model`` (the workbench's: checks the memory first).
        model: the model, already built.

    Example:
        >>> class Encoder:
        ...     fingerprint, dim = "enc:v1", 4
        ...     def encode_images(self, images): return [0.0] * self.dim
        >>> built = []
        >>> r = Resident("enc", lambda: built.append(1) or Encoder(), Encoder())
        >>> r.release(), r.loaded, r.fingerprint, r.dim, built  # plain attributes: no new build
        (True, False, 'enc:v1', 4, [])
        >>> len(r.encode_images([])), r.loaded, built  # a method: built again
        (4, True, [1])
    """

    def __init__(self, name: str, load: Callable[[], Any], model: Any):
        self.__dict__.update(_name=name, _load=load, _model=None, _names=frozenset())
        self._keep(model)

    def _keep(self, model: Any) -> None:
        import inspect

        self.__dict__["_model"] = model
        self.__dict__["_cls"] = type(model)
        names = set(dir(model))
        self.__dict__["_names"] = frozenset(names)
        for attr in names:  # plain values (fingerprint, kind, dim, model_name): readable while released
            if attr.startswith("_"):
                continue
            value = inspect.getattr_static(model, attr, None)  # no property is run
            if isinstance(value, _PLAIN) or (isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value)):
                self.__dict__[attr] = value

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self.model, attr, value)
        if attr in self.__dict__:
            self.__dict__[attr] = value

    @property
    def __class__(self):  # noqa: D105 - the model's class (isinstance, reports), without building it again
        return self.__dict__["_cls"]

    @property
    def model(self) -> Any:
        """The model itself (built again if it was released)."""
        if self.__dict__["_model"] is None:
            self._keep(self.__dict__["_load"]())
        return self.__dict__["_model"]

    @property
    def loaded(self) -> bool:
        return self.__dict__["_model"] is not None

    def release(self) -> bool:
        """Drop the model; whether one was held."""
        held = self.__dict__["_model"] is not None
        self.__dict__["_model"] = None
        return held

    def __getattr__(self, attr: str) -> Any:  # only what __dict__ and the class lack
        if attr.startswith("__") or attr not in self.__dict__["_names"]:
            raise AttributeError(f"{self.__dict__['_name']!r} ({type(self.__dict__['_model']).__name__}) has no "
                                 f"attribute {attr!r}")
        return getattr(self.model, attr)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "released"
        return f"Resident({self.__dict__['_name']!r}, {state}, fingerprint={self.__dict__.get('fingerprint')!r})"


@dataclass(frozen=True)
class GateUse:
    """What one gate still to run reads: its role (``candidate``, ``baseline``), whether it may generate,
    and the scorers its family declares (:data:`ALL`: not declared, so every one)."""

    role: str
    generates: bool
    scorers: frozenset[str] | None = ALL


def still_needed(remaining: Iterable[GateUse]) -> dict[str, tuple[bool, frozenset[str] | None]]:
    """Per role: whether the generator is still needed, and the scorers (:data:`ALL`: keep every one).

    Example:
        >>> needed = still_needed([GateUse("candidate", False, frozenset({"clip"})), GateUse("candidate", False, frozenset({"vit"}))])
        >>> needed["candidate"][0], sorted(needed["candidate"][1])
        (False, ['clip', 'vit'])
    """
    out: dict[str, tuple[bool, frozenset[str] | None]] = {}
    for use in remaining:
        generates, scorers = out.get(use.role, (False, frozenset()))
        scorers = ALL if scorers is ALL or use.scorers is ALL else scorers | use.scorers
        out[use.role] = (generates or use.generates, scorers)
    return out
