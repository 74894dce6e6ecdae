"""The ``public-module`` directive: a public module's docstring and every name of its ``__all__``.

``.. public-module:: structlog_etw.write.fields`` stands for ``automodule`` of the module's docstring
followed by one ``autoclass`` / ``autoexception`` / ``autofunction`` / ``autodata`` per name of its
``__all__``, in that order.  automodule's own ``:members:`` is not enough here: it leaves out every
constant and type alias without a ``#:`` comment in that very module (``fields.BOOL``, re-exported
constants such as ``eventheader.PERF_MAX_EVENT_SIZE``, ``__version__``) and the names a package
loads on first use through its module ``__getattr__`` (``eventheader.decode_event``).  Listing the
names from ``__all__`` documents exactly the public API, nothing more and nothing less.

It also resolves the Python cross-references Sphinx cannot (``missing-reference``): a docstring that
names an object its module imports (``:data:`PERF_MAX_EVENT_SIZE``` in ``eventheader.encoder``)
links to where that object is documented; a name that exists but is no public API (a private
module, a type variable, an undocumented constant) is shown as code without a link; a name that
does not exist at all stays an error of the nitpicky build.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode, nested_parse_with_titles


def _directive_for(obj: Any) -> str:
    if isinstance(obj, types.GenericAlias):  # a type alias such as ``Field = tuple[str, int, Any]``
        return "autodata"
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if inspect.isroutine(obj):
        return "autofunction"
    return "autodata"


def public_module_lines(name: str) -> list[str]:
    """The reStructuredText the directive expands to for module ``name``."""
    module = importlib.import_module(name)
    names: list[str] = list(module.__all__)
    lines = [f".. automodule:: {name}", "   :no-members:", ""]
    for attr in names:
        lines += [f".. {_directive_for(getattr(module, attr))}:: {name}.{attr}", ""]
    return lines


class PublicModule(SphinxDirective):
    """``.. public-module:: dotted.name``: see the module docstring."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        source = self.get_source_info()
        content = StringList()
        for line in public_module_lines(name):
            content.append(line, source[0], source[1] or 0)
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, content, node)
        return node.children


def _dataclass_factories(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str | None, ret: str | None
) -> tuple[str | None, str | None] | None:
    """``field: T = <factory>`` of a dataclass -> ``field: T = dict()``: the call that makes it.

    ``<factory>`` is not Python, so Sphinx could not parse the signature and would cut it at its
    commas (``dict[str`` as a type to link).
    """
    if what != "class" or not signature or not dataclasses.is_dataclass(obj):
        return None
    for f in dataclasses.fields(obj):
        if f.default_factory is not dataclasses.MISSING and f.init:
            factory = getattr(f.default_factory, "__qualname__", "factory")
            signature = signature.replace("<factory>", f"{factory}()", 1)
    return signature, ret


_MISSING = object()


def _lookup(dotted: str) -> Any:
    """The object named ``dotted`` (module path, then attributes), or ``_MISSING``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _resolve_missing(app: Sphinx, env: Any, node: Any, contnode: nodes.Element) -> nodes.Node | None:
    if node.get("refdomain") != "py":
        return None
    target: str = node["reftarget"].lstrip(".")
    module, cls = node.get("py:module"), node.get("py:class")
    scopes = [".".join(p for p in (module, cls) if p), module]
    owner = _lookup(scopes[0]) if cls else _MISSING
    if owner is not _MISSING:  # the class's own module, where its docstring was written
        scopes.append(getattr(owner, "__module__", None))
    obj = _MISSING
    for scope in [*(s for s in scopes if s), ""]:
        obj = _lookup(f"{scope}.{target}" if scope else target)
        if obj is not _MISSING:
            break
    if obj is _MISSING:
        return None  # no such object: the nitpicky build reports it
    last = target.rsplit(".", 1)[-1]
    domain = env.get_domain("py")
    for name, entry in sorted(domain.objects.items()):
        if name.rsplit(".", 1)[-1] == last and not entry.aliased and _lookup(name) is obj:
            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)
    return contnode  # a real name that is no public API: code, without a link


class SameObjectReferences(SphinxPostTransform):
    """A short name that matches several documented names of one object links to its home.

    A package re-exports names of its modules, so ``Listener`` in an annotation matches
    ``structlog_etw.perf.Listener`` and ``structlog_etw.perf.listener.Listener``:
    the same class, documented on both module's pages.  Such a reference goes to the module that
    defines the object; a short name that matches different objects stays ambiguous (a warning).
    """

    default_priority = 5  # before Sphinx's ReferencesResolver (10)

    def run(self, **kwargs: Any) -> None:
        objects = self.env.get_domain("py").objects
        for node in self.document.findall(addnodes.pending_xref):
            target = node.get("reftarget", "")
            if node.get("refdomain") != "py" or not target:
                continue
            short = target.lstrip(".")
            module, cls = node.get("py:module"), node.get("py:class")
            exact = [short, f"{module}.{short}", f"{module}.{cls}.{short}"]
            if any(name in objects for name in exact):
                continue
            matches = [name for name in objects if name == short or name.endswith("." + short)]
            if len(matches) < 2:
                continue
            found = {id(_lookup(name)): _lookup(name) for name in matches}
            if len(found) != 1 or _MISSING in found.values():
                continue
            obj = next(iter(found.values()))
            home = [name for name in matches if name.rsplit(".", 1)[0] == getattr(obj, "__module__", None)]
            node["reftarget"] = (home or sorted(matches))[0]
            node["refspecific"] = False


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive and the reference resolver."""
    app.add_directive("public-module", PublicModule)
    app.connect("missing-reference", _resolve_missing)
    app.connect("autodoc-process-signature", _dataclass_factories)
    app.add_post_transform(SameObjectReferences)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
