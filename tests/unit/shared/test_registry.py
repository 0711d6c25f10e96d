"""The typed registry every family uses (`shared.registry.Registry`)."""

from __future__ import annotations

from typing import ClassVar

import pytest

from privrec.shared.errors import ConfigError
from privrec.shared.registry import Registry, parameter_names


class Base:
    name: ClassVar[str]


class Alpha(Base):
    name = "alpha"

    def __init__(self, k: int = 1, *, scale: float = 2.0) -> None:
        if k < 1:
            raise ValueError(f"`k` must be >= 1, got {k!r}")
        self.k, self.scale = k, scale


class Beta(Base):
    name = "beta"


def make() -> Registry[Base]:
    reg: Registry[Base] = Registry("widget", "widget.name", Base)
    reg.register(Alpha)
    return reg


def test_registry_is_a_read_only_mapping_of_names() -> None:
    """Iteration, membership, length and dict equality behave like a mapping."""
    reg = make()
    assert list(reg) == ["alpha"] and "alpha" in reg and len(reg) == 1
    assert reg == {"alpha": Alpha}
    assert reg["alpha"] is Alpha


def test_register_refuses_wrong_members() -> None:
    """A non-member class, a missing name or a taken name is refused."""
    reg = make()
    with pytest.raises(TypeError, match="must subclass Base"):
        reg.register(int)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty string `name`"):
        reg.register(type("Nameless", (Base,), {}))

    class Impostor(Base):
        name = "alpha"

    with pytest.raises(ValueError, match="taken by Alpha"):
        reg.register(Impostor)
    reg.register(Alpha)  # registering the same class again is a no-op
    assert len(reg) == 1


def test_register_refuses_a_member_that_leaves_a_declaration_unset() -> None:
    """A family's declared class attributes are checked at registration, so a mechanism
    without `releases` is refused there, not by an AttributeError in the compatibility
    check of the first run that names it."""
    reg: Registry[Base] = Registry("widget", "widget.name", Base, declares=("releases",))
    with pytest.raises(TypeError, match=r"widget 'alpha' \(Alpha\) must declare `releases`"):
        reg.register(Alpha)
    declared = type("Declared", (Alpha,), {"releases": "ratings"})
    assert reg.register(declared) is declared


def test_every_family_member_declares_what_compatibility_reads() -> None:
    """Each registered mechanism, model and attack sets its family's declarations."""
    from privrec.adversary.attacks import ATTACKS
    from privrec.server.models import MODELS
    from privrec.shared.mechanisms import MECHANISMS

    for family in (MECHANISMS, MODELS, ATTACKS):
        assert family.declares
        for name in family:
            cls = family[name]  # a lazy member is imported and checked here
            assert all(hasattr(cls, attribute) for attribute in family.declares), name


def test_registered_is_temporary() -> None:
    """`registered` adds a member for a `with` block only."""
    reg = make()
    with reg.registered(Beta):
        assert reg["beta"] is Beta
    assert "beta" not in reg


def test_build_names_the_key_and_the_valid_parameters() -> None:
    """Unknown names list the known ones; a parameter typo lists the valid parameters (no
    Python internals); a bad value keeps the member's own message."""
    reg = make()
    assert reg.build("alpha", {"k": 3}).k == 3  # type: ignore[attr-defined]
    with pytest.raises(
        ConfigError, match=r"widget.name: unknown widget 'gamma'; known: \['alpha'\]"
    ):
        reg.build("gamma")
    with pytest.raises(ConfigError) as info:
        reg.build("alpha", {"kk": 3})
    assert str(info.value) == "widget.alpha: unknown parameter 'kk'; valid: ['k', 'scale']"
    assert "__init__" not in str(info.value)
    with pytest.raises(ConfigError, match=r"widget.alpha: `k` must be >= 1, got 0"):
        reg.build("alpha", {"k": 0})


def test_build_refuses_a_non_number_for_a_numeric_parameter_naming_it() -> None:
    """`--set mechanism.params.epsilon=abc` arrives as the string "abc": refused naming the
    parameter before the constructor sees it (a bool is not a number either)."""
    reg = make()
    with pytest.raises(ConfigError, match=r"widget.alpha: parameter 'scale' must be a number"):
        reg.build("alpha", {"scale": "abc"})
    with pytest.raises(ConfigError, match=r"parameter 'k' must be an integer, got True"):
        reg.build("alpha", {"k": True})
    assert reg.build("alpha", {"k": 2, "scale": 3}).scale == 3


def test_parameter_names() -> None:
    """Keyword parameters of the constructor; None when it takes **kwargs."""
    assert parameter_names(Alpha) == {"k", "scale"}

    class Loose:
        def __init__(self, **kwargs: object) -> None: ...

    assert parameter_names(Loose) is None


def test_a_lazy_member_is_imported_and_checked_on_first_lookup() -> None:
    """`register_lazy` names a class by where it lives: nothing is imported until the name is
    looked up; then it is the class itself, checked like `register` checks it."""
    import sys

    reg: Registry[Base] = Registry("widget", "widget.name", Base)
    reg.register_lazy("beta", __name__, "Beta")
    reg.register_lazy("missing", "privrec_no_such_module_anywhere", "Gamma")
    assert list(reg) == ["beta", "missing"] and "privrec_no_such_module_anywhere" not in sys.modules
    assert reg.lookup("beta") is Beta and reg["beta"] is Beta
    reg.register(Beta)  # the same class again, now resolved: a no-op
    with pytest.raises(ValueError, match="taken"):
        reg.register_lazy("beta", __name__, "Beta")
    with pytest.raises(ModuleNotFoundError):
        reg["missing"]

    wrong: Registry[Base] = Registry("widget", "widget.name", Base)
    wrong.register_lazy("gamma", __name__, "Alpha")  # Alpha's name is "alpha"
    with pytest.raises(TypeError, match="registered as widget 'gamma' but its `name` is 'alpha'"):
        wrong["gamma"]
    wrong.register_lazy("int", "builtins", "int")
    with pytest.raises(TypeError, match="must subclass Base"):
        wrong["int"]


@pytest.mark.parametrize(
    ("package", "table", "registry"),
    [
        ("privrec.server.models", "_MODELS", "MODELS"),
        ("privrec.adversary.attacks", "_ATTACKS", "ATTACKS"),
    ],
)
def test_a_deferred_family_names_every_member_right(
    package: str, table: str, registry: str
) -> None:
    """Every model and attack is registered by where it lives (a node imports only what it
    runs); each entry resolves to a class whose `name` is the one it is registered under, and
    the class is importable from the family's package."""
    import importlib

    family = importlib.import_module(package)
    members = getattr(family, registry)
    assert [name for name, _, _ in getattr(family, table)] == list(members)
    for name in members:
        assert members[name].name == name
        assert getattr(family, members[name].__name__) is members[name]
