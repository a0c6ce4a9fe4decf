"""``compare.migrate SCRIPT --emit OUT.py``: a runnable tf.data port of a TF1 script's input
pipelines, written from the typed plans (:mod:`.model`) and the symbolic runs behind them.

For each pipeline function of the script, a function of the same name and parameters that
returns a ``tf.data.Dataset`` (a pipeline built in the script's top-level code becomes
``pipeline()``; a pipeline method becomes a method of a class of the same name, with the
``__init__`` and the methods it calls). Pipelines one function builds under conditions it decides
at run time (``if shuffle:`` around ``shuffle_batch`` / ``batch``) are one function whose code
carries the same conditions, written once where the ways agree. Its body: the setup statements
the pipeline needs (file lists, constants, checks), the per-example code lifted from the script's
functions (:mod:`.lift`) as the function given to ``Dataset.map``, the code that prepared each
batch (:mod:`.batchpart`) as a map after ``batch``, and the tf.data chain of the plan
(:mod:`.chain`). Names are TF 2.21's and random draws stateless (:mod:`.rewrite`). The script's
helpers that the lifted code calls (``augmentbody``), the module constants and the imports it
uses are copied, rewritten the same way.

Every statement is placed where the names it reads are bound (:mod:`.bindings`); one that reads
a name the port never binds is left out with a TODO. What cannot be converted gets
``# TODO(migrate): ...`` at the spot; a pipeline whose source this file cannot settle raises
NotImplementedError when called, after its TODOs. A pipeline is reported complete only when
nothing stops it from running. The module always imports: nothing in it runs until a pipeline
function is called.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any

from compare.migration import chain as _chain
from compare.migration import model as m
from compare.migration import portclass, porthelpers
from compare.migration.astutil import clone, loads, stored_names
from compare.migration.bindings import binds, reads_unbound
from compare.migration.lift import Lifter
from compare.migration.lifted import Lifted
from compare.migration.rewrite import DRAWS, Rewriter, summary_call
from compare.migration.values import MODULE, ClassInfo, FuncInfo, Module

TODO = "# TODO(migrate): "
INDENT = "    "
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__"}
_SEEDING = frozenset({"random.seed", "np.random.seed", "numpy.random.seed"})
#: A statement of the port, or a TODO of its own (a line of text).
_Line = ast.stmt | str


@dataclasses.dataclass
class EmittedPipeline:
    """One function of the port. ``original``: the script function it replaces (``<module>``
    for top-level code: then ``until_line`` is the last script line that builds it and
    ``output`` the names its elements were bound to); ``returns``: the original function returns
    its batches (so ``--check`` can call it); ``complete``: no TODO stops it from running."""

    name: str
    original: str
    params: tuple[str, ...]
    line: int
    returns: bool
    complete: bool
    until_line: int = 0
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Emitted:
    """The port: its text, its functions, its TODOs (line in the port, what) and notes."""

    script: str
    text: str
    pipelines: list[EmittedPipeline]
    todos: list[tuple[int, str]]
    notes: list[str]

    def summary(self, out: str) -> str:
        """What ``--emit`` prints."""
        names = ", ".join(f"{p.name}()" if p.complete else f"{p.name}() (incomplete)"
                          for p in self.pipelines) or "none"
        lines = [f"wrote {out}: a tf.data port of {self.script}; pipeline functions: {names}"]
        if self.todos:
            lines.append(f"{len(self.todos)} TODO(migrate) to finish by hand:")
            lines += [f"  {out}:{ln}: {what}" for ln, what in self.todos]
        else:
            lines.append("no TODOs: every pipeline was converted")
        lines += [f"note: {n}" for n in dict.fromkeys(self.notes)]
        return "\n".join(lines) + "\n"


@dataclasses.dataclass
class _Part:
    """One variant's code: its lines, the lifting behind it, and whether it can run."""

    lines: list[str]
    lifted: Lifted | None
    fatal: bool
    blocked: int = 0


class _Emitter:
    def __init__(self, mod: Module, script: str):
        self.mod, self.script = mod, script
        self.functions: list[str] = []
        self.pipelines: list[EmittedPipeline] = []
        self.notes: list[str] = []
        self.helpers: dict[str, tuple[str, int, set[str]]] = {}  # name -> (code, draws, uses)
        self.globals_needed: list[str] = []
        self.undefined: set[str] = set()
        self.asked: set[str] = set()  # the global names the current pipeline needed
        self.taken = set(mod.by_name) | set(mod.classes) | set(mod.consts) | set(mod.imports)
        self.uses_draws = False
        self.helpers_used: set[str] = set()
        self.extra_imports: set[str] = set()
        self.global_code: dict[int, list[str]] = {}  # module statement -> its port lines
        self.blocked = 0
        self.self_calls: set[str] = set()
        self.self_attrs: set[str] = set()
        self.classes = portclass.Classes(self)
        self.pipeline_names: set[str] = set()
        self.cls: ClassInfo | None = None  # the class of the pipeline method being written
        self.star = [s for s in mod.tree.body if isinstance(s, ast.ImportFrom) and any(
            a.name == "*" for a in s.names) and not (s.module or "").startswith("tensorflow")]

    # -- statements -------------------------------------------------------------------------
    def code(self, stmts: Sequence[_Line], locals_: set[str],
             live: bool = False) -> tuple[list[str], int, set[str]]:
        """Statements rewritten to TF 2 (with their TODOs; a string is a TODO of its own), the
        number of random draws in them, and the global names they use."""
        lines, draws, used = [], 0, set()
        for stmt in _live(stmts) if live else stmts:
            if isinstance(stmt, str):  # a TODO, or a comment of its own
                lines.append(stmt if stmt.startswith("#") else f"{TODO}{stmt}")
                continue
            if _is_docstring(stmt):
                continue
            dropped = summary_call(self.mod, stmt)
            if dropped is not None:
                lines.append(f"{TODO}dropped {dropped[:70]}: write input summaries in the "
                             "training loop (a tf.summary writer and a step)")
                continue
            rw = Rewriter(self.mod, locals_)
            new = rw.visit(stmt)
            self.notes += rw.notes
            draws += rw.draws
            self.blocked += rw.blocking
            self.helpers_used |= rw.helpers
            self.extra_imports |= rw.imports
            lines += [f"{TODO}{t}" for t in dict.fromkeys(rw.todos)]
            for s in new if isinstance(new, list) else [new] if new is not None else []:
                text = ast.unparse(ast.fix_missing_locations(s))
                if porthelpers.TF1_ELEMENT in text:
                    self.helpers_used.add(porthelpers.TF1_ELEMENT)
                lines += text.split("\n")
                used |= _free(s)
                self.self_calls |= _self_members(s, calls=True)
                self.self_attrs |= _self_members(s, calls=False)
        return lines, draws, used - locals_

    # -- helpers and globals ----------------------------------------------------------------
    def need(self, names: set[str]) -> int:
        """Copy what these global names stand for; the random draws the copied helpers make.
        A name nothing in the script binds is noted in ``undefined``."""
        draws = 0
        for name in sorted(names):
            self.asked.add(name)
            if name in _BUILTINS or name in ("tf", DRAWS, "self") or \
                    name in porthelpers.NAMES or name in self.pipeline_names or \
                    name in {i.split()[1].split(".")[0] for i in self.extra_imports}:
                continue
            if name in self.classes.emitted:
                continue
            if name in self.mod.by_name:
                draws += self.helper(name)
            elif name not in self.globals_needed:
                self.globals_needed.append(name)
                stmts = _module_bindings(self.mod, name)
                if not stmts:
                    self.undefined.add(name)
                for s in stmts:
                    if isinstance(s, ast.ClassDef):
                        draws += self.helper(name, s)
                    elif _parses_command_line(s) and id(s) not in self.global_code:
                        said = _one_line(ast.unparse(s))
                        self.global_code[id(s)] = [
                            f"{TODO}{said} (line {s.lineno}) reads the command line: the port "
                            f"does not run it when imported; set {name} before calling a "
                            f"pipeline function (for instance with {said})"]
                        draws += self.need(_loads(s) - stored_names(s))
                    elif not isinstance(s, (ast.Import, ast.ImportFrom)) and \
                            id(s) not in self.global_code:
                        self.global_code[id(s)], _d, used = self.code([clone(s)], set())
                        draws += self.need(used - stored_names(s))
        return draws

    def signature(self, info: FuncInfo) -> tuple[str, list[str]]:
        """The port function's parameters, as the script wrote them, and the lines that open
        its body. A default that reads what the command line sets (absl / TF flags, argparse)
        or a name this script does not define would run when the port is imported: it becomes
        None, and the body reads the script's default when called. The names defaults read are
        carried."""
        args = clone(m.req(info.args))
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):],
                         range(len(args.defaults)))) if args.defaults else []
        late: list[tuple[str, ast.expr]] = []
        for arg, i in pairs:
            if self.late(args.defaults[i]):
                late.append((arg.arg, args.defaults[i]))
                args.defaults[i] = ast.Constant(None)
        for i, (arg, d) in enumerate(zip(args.kwonlyargs, args.kw_defaults)):
            if d is not None and self.late(d):
                late.append((arg.arg, d))
                args.kw_defaults[i] = ast.Constant(None)
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.need(_loads(d))
        stmts: list[_Line] = []
        for name, d in late:
            missing = sorted(n for n in _loads(d) if _undefined(self.mod, n))
            if missing:
                stmts.append(f"the default of {name} reads {', '.join(missing)}, which this "
                             "script does not define: pass it, or define it here")
            stmts.append(ast.If(ast.Compare(ast.Name(name, ast.Load()), [ast.Is()],
                                            [ast.Constant(None)]),
                                [ast.Assign([ast.Name(name, ast.Store())], d, lineno=0)], []))
        lines, _d, used = self.code(stmts, set(info.params))
        self.need(used)
        return ast.unparse(args), lines

    def late(self, default: ast.expr) -> bool:
        """Does this default read a name only the command line sets, or one this script does
        not define (so it must not run when the port is imported)?"""
        return any(_command_line_name(self.mod, n) or _undefined(self.mod, n)
                   for n in _loads(default))

    def helper(self, name: str, node: ast.stmt | None = None) -> int:
        """Copy the script's function (or class) ``name``, rewritten; its draws (with its
        callees')."""
        if name in self.helpers:
            return self.helpers[name][1]
        self.helpers[name] = ("", 0, set())  # recursion guard
        if node is None:
            node = self.mod.by_name[name].definition
        copy = clone(node)
        if isinstance(copy, (ast.FunctionDef, ast.AsyncFunctionDef)) and copy.decorator_list:
            copy.decorator_list = []
        lines, draws, used = self.code([copy], stored_names(node) | _params(node))
        self.helpers[name] = ("\n".join(lines), draws, used)
        total = draws + self.need(used - {name})
        self.helpers[name] = ("\n".join(lines), total, used)
        return total

    # -- pipelines --------------------------------------------------------------------------
    def group(self, ps: list[m.Pipeline]) -> None:
        """One port function for pipelines the script builds in one function under conditions
        it decides at run time (their variants become that function's branches)."""
        p = ps[0]
        info = _info(self.mod, p.function)
        name = "pipeline" if p.function == MODULE else p.function.rsplit(".", 1)[-1]
        cls = info.cls.name if info is not None and info.cls is not None and \
            info.parent is None else ""
        if p.function != MODULE and not cls:
            self.taken.discard(name)
        taken = self.classes.names(cls) if cls else {e.name for e in self.pipelines} | (
            self.taken if p.function == MODULE else set())
        name = _unique(name, taken)
        merged = dataclasses.replace(p, variants=[v for q in ps for v in q.variants],
                                     unresolved=[u for q in ps for u in q.unresolved])
        params, opening = self.signature(info) if info is not None and p.function != MODULE \
            else ("", [])
        doc = textwrap.wrap(f"The tf.data port of {_where(ps)}.", 92)
        head = [f"def {name}({params}):", f'{INDENT}"""' + f"\n{INDENT}".join(doc) + '"""']
        head += [INDENT + ln for ln in opening]
        why = portclass.unsupported(info, p)
        self.self_calls, self.self_attrs = set(), set()
        self.cls = info.cls if cls and info is not None else None
        if why:
            body = [f"{TODO}{why}", f"raise NotImplementedError({p.function!r})"]
            lifted_first, complete = None, False
        else:
            body, lifted_first, complete = self.variants(merged, name)
        text = "\n".join(head + [INDENT + ln if ln else "" for ln in body])
        if cls:
            complete = self.classes.add(cls, name, text, m.req(info)) and complete
        else:
            self.functions.append(text)
        shown = f"{cls}.{name}" if cls else name
        self.pipelines.append(EmittedPipeline(
            shown, p.function, tuple(info.params) if info is not None else (), p.line,
            bool(lifted_first and lifted_first.entry_returns), complete,
            lifted_first.end_line if lifted_first else 0,
            ast.unparse(lifted_first.output) if lifted_first and lifted_first.output else ""))

    def variants(self, p: m.Pipeline, name: str) -> tuple[list[str], Lifted | None, bool]:
        parts = [self.variant(p, v, name) for v in p.variants]
        first = next((x.lifted for x in parts if x.lifted is not None), None)
        complete = all(not x.fatal and not x.blocked for x in parts)
        if len(parts) == 1:
            return parts[0].lines, first, complete
        merged = _chain._merge([(v.when, x.lines) for v, x in zip(p.variants, parts)])
        return _fill_empty_blocks(merged), first, complete

    def variant(self, p: m.Pipeline, v: m.Variant, name: str) -> _Part:
        if v.origin is None:
            return _Part([f"{TODO}this pipeline was not planned", "raise NotImplementedError"],
                         None, True)
        blocked0 = self.blocked
        self.asked = set()
        lifted = Lifter(self.mod, p, v).lift()
        ex_name, af_name = f"{name}_example", f"{name}_batch"
        parts = _Nodes.of(lifted, set(p.params))
        probe, _f, _u = self.chain(p, v, ex_name if parts.example else "",
                                   af_name if parts.after else "", True, set(), code=False)
        parts.prune(_loads_of_lines(probe), self.mod)
        locals_ = parts.locals() | {"ds", ex_name, af_name}
        setup, d0, used = self.code(parts.setup, locals_)
        example, seeded, used_ex = self.example_fn(lifted, parts, ex_name, v, locals_, d0)
        after, after_seeded, used_af = self.after_fn(lifted, parts, af_name, locals_)
        chain_lines, fatal, used_ch = self.chain(p, v, ex_name if example else "",
                                                 af_name if after else "", seeded,
                                                 locals_ | parts.bound, parts.script_locals,
                                                 after_seeded=after_seeded)
        self.need(used | used_ex | used_af | used_ch)
        missing = sorted(self.undefined & self.asked) if not self.star else []
        lines = [f"{TODO}{n} is not defined in this script (another module, or a name the "
                 "script expects to exist): define or import it" for n in missing]
        if not example and any(st.steps for st in v.maps()):
            lines.append(f"{TODO}the per-example code of the plan could not be lifted into a "
                         "map function (the script runs it on what it read in another shape): "
                         "write the map from the plan (python -m compare.migrate SCRIPT)")
            self.blocked += 1
        lines += setup + [f"{TODO}{t}" for t in lifted.todos]
        lines += example + after + chain_lines
        if not fatal:
            lines.append("return ds")
        return _Part(lines, lifted, fatal, self.blocked - blocked0 + len(missing) + parts.blocked)

    def example_fn(self, lifted: Lifted, parts: "_Nodes", name: str, v: m.Variant,
                   locals_: set[str], setup_draws: int = 0) -> tuple[list[str], bool, set[str]]:
        """The map function; seeded when it, a helper it calls or a function the setup
        defines (pix2pix's ``transform``) draws."""
        if lifted.returns is None:
            return [], False, set()
        stmts = parts.example + self.checked_return(lifted.returns, parts, parts.example_bound)
        body, draws, used = self.code(stmts, locals_, live=True)
        draws += self.need(used) + setup_draws + self.method_draws()
        seeded = draws > 0
        self.uses_draws |= seeded
        tuple_element = _tuple_element(v)
        if seeded:
            sig = "example, seed"
            body = ["with _draws.example(seed):"] + [INDENT + ln for ln in body]
        else:
            sig = "*example" if tuple_element else "example"
        doc = (f'{INDENT}"""One example: {_steps_text(v)}."""')
        return [f"def {name}({sig}):", doc] + [INDENT + ln for ln in body] + [""], seeded, used

    def after_fn(self, lifted: Lifted, parts: "_Nodes", name: str,
                 locals_: set[str]) -> tuple[list[str], bool, set[str]]:
        """The per-batch map function; seeded (a seed per batch) when it draws."""
        params = parts.batch_params
        if not parts.after:
            return [], False, set()
        stmts = list(parts.after)
        if not isinstance(stmts[-1], ast.Return):
            stmts += self.checked_return(lifted.output, parts, parts.after_bound)
        last = stmts[-1]
        if len(stmts) == 1 and isinstance(last, ast.Return) and isinstance(
                last.value, (ast.Tuple, ast.Name)) and ast.unparse(last.value).strip(
                "()").replace(" ", "") == ",".join(params):
            return [], False, set()  # hands out the batch as it is
        body, draws, used = self.code(stmts, locals_, live=True)
        draws += self.need(used) + self.method_draws()
        sig = ", ".join(params) if all(p.isidentifier() for p in params) else "*batch"
        doc = f'{INDENT}"""One batch, as the script finished it."""'
        if draws:
            self.uses_draws = True
            unpack = f"{sig} = batch" if sig != "*batch" else "batch = tuple(batch)"
            body = [unpack, "with _draws.example(seed):"] + [INDENT + ln for ln in body]
            sig = "batch, seed"
        return [f"def {name}({sig}):", doc] + [INDENT + ln for ln in body] + [""], draws > 0, \
            used

    def checked_return(self, value: ast.expr | None, parts: _Nodes,
                       bound: set[str]) -> list[_Line]:
        """``return value``; a TODO above it (and the pipeline counted as unfinished) when it
        reads a name nothing before it binds."""
        ret = ast.Return(value)
        missing = reads_unbound(ret, bound) & (parts.locals() | parts.script_locals)
        if not missing:
            return [ret]
        self.blocked += 1
        return [f"the element reads {', '.join(sorted(missing))}, which only the TF1 code the "
                "port replaces binds: compute it here", ret]

    def method_draws(self) -> int:
        """The random draws of the class's methods the code just written calls."""
        if self.cls is None:
            return 0
        return self.classes.draws(self.cls, set(self.self_calls))

    def chain(self, p: m.Pipeline, v: m.Variant, example: str, after: str, seeded: bool,
              bound: set[str], script: set[str] | None = None, code: bool = True,
              after_seeded: bool = False) -> tuple[list[str], bool, set[str]]:
        maps = v.maps()
        stages = [dataclasses.replace(st) if isinstance(st, m.MapStage) else st
                  for st in v.stages]
        if example and not maps:
            at = next((i for i, s in enumerate(stages) if isinstance(s, m.BatchStage)),
                      len(stages))
            stages.insert(at, m.MapStage(example, []))
        elif len(maps) > 1:
            return [f"{TODO}this pipeline has {len(maps)} per-example stages with queues "
                    "between them; only one is lifted: merge them into one map by hand",
                    "raise NotImplementedError"], True, set()
        for st in stages:
            if isinstance(st, m.MapStage):
                st.name = example or st.name
        if not example:
            stages = [st for st in stages if not isinstance(st, m.MapStage)]
        shown = dataclasses.replace(v, stages=stages)
        render = _ChainCode("ds", p, shown, {example} if seeded else set(), after,
                            after_seeded)
        render.seeded = {example} if seeded else set()
        lines = render.lines()
        bad = [ln for ln in lines if "..." in ln or "unresolved" in ln]
        if not code:
            return lines, False, set()
        if bad or v.source.kind in ("unknown", "provider", "generator"):
            todo = [f"{TODO}{u}" for u in _unresolved(p)] or [
                f"{TODO}the {v.source.kind} source of this pipeline: {ln.strip()}" for ln in bad]
            what = "; ".join(u.what for u in p.unresolved)[:120] or "the source"
            return todo + [f"{TODO}the tf.data chain of the plan, to finish:"] + [
                "# " + ln for ln in lines] + [
                f"raise NotImplementedError({('compare.migrate could not settle ' + what)!r})"], \
                True, set()
        stmts: list[_Line] = []
        parsed = ast.parse("\n".join(lines)).body
        bound = bound | {"ds"} | {n for s in parsed for n in binds(s)}  # ds_1, ds_2 of branches
        for s in parsed:
            missing = reads_unbound(s, bound) & (script or set())
            if missing:
                stmts.append(f"{', '.join(sorted(missing))} is bound only inside the TF1 code "
                             "this chain replaces: give it its value here")
                self.blocked += 1
            stmts.append(s)
        code_lines, _d, used = self.code(stmts, bound)
        return [f"{TODO}{u}" for u in _unresolved(p)] + code_lines, False, used

    # -- the module -------------------------------------------------------------------------
    def module(self) -> str:
        classes = self.classes.texts()  # first: what they need joins the globals
        parts = [_docstring(self.script, self.pipelines)]
        imports = ["import tensorflow as tf"]
        if self.uses_draws:
            imports.insert(0, "import contextlib")
        body, seen = [], set()
        stmts = sorted({id(s): s for n in self.globals_needed
                        for s in _module_bindings(self.mod, n)}.values(), key=lambda s: s.lineno)
        for s in stmts:
            name = next(n for n in self.globals_needed if s in _module_bindings(self.mod, n))
            if id(s) in seen or isinstance(s, ast.ClassDef):
                continue
            seen.add(id(s))
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                text = _import_text(s, name)
                if text and text not in imports:
                    imports.append(text)
            else:
                body += self.global_code.get(id(s), [])
        imports += [i for i in porthelpers.imports(self.helpers_used) + sorted(
            self.extra_imports) if i not in imports]
        if self.undefined and self.star:
            imports += [ast.unparse(s) for s in self.star]  # the names may come from these
        parts.append("\n".join(imports))
        if body:
            parts.append("\n".join(body))
        if self.uses_draws:
            parts.append(porthelpers.DRAWS_HELPER.strip("\n"))
        parts += porthelpers.texts(self.helpers_used)
        parts += [code for code, _d, _u in self.helpers.values() if code]
        parts += classes
        parts += self.functions
        return "\n\n\n".join(parts) + "\n"


@dataclasses.dataclass
class _Nodes:
    """A variant's statements in the port's names, each part checked for names read before the
    port binds them (left out, with a TODO saying why)."""

    setup: list[_Line]
    example: list[_Line]
    after: list[_Line]
    params: set[str]
    script_locals: set[str]
    batch_params: list[str]
    returns: list[ast.expr]
    bound: set[str] = dataclasses.field(default_factory=set)
    example_bound: set[str] = dataclasses.field(default_factory=set)
    after_bound: set[str] = dataclasses.field(default_factory=set)
    blocked: int = 0

    @classmethod
    def of(cls, lifted: Lifted, params: set[str]) -> "_Nodes":
        return cls([c.apply(s) for s, c, *_ in lifted.setup],
                   [*lifted.element, *(c.apply(s) for s, c, *_ in lifted.example)],
                   [c.apply(s) for s, c, *_ in lifted.after], params, lifted.script_locals,
                   list(lifted.batch_params or ()),
                   [x for x in (lifted.returns, lifted.output) if x is not None])

    def locals(self) -> set[str]:
        out = set(self.params) | set(self.batch_params) | {"example", "seed"}
        for s in self.setup + self.example + self.after:
            if not isinstance(s, str):
                out |= stored_names(s) | binds(s)
        return out

    def prune(self, chain_loads: set[str], mod: Module) -> None:
        """Setup keeps what the rest needs (and the checks on it); then each part is put in
        binding order."""
        example, after = _stmts(self.example), _stmts(self.after)
        needed = chain_loads | set().union(*(loads(s) for s in [*example, *after,
                                                                *self.returns]))
        setup = _needed(_stmts(self.setup), needed, self.params)
        self.setup = [*setup]
        scope = self.locals() | self.script_locals
        self.setup, bound = self.ordered(setup, set(self.params), scope)
        self.bound = bound
        # a name the map function assigns is its own local: the outer binding does not count
        own_ex = set().union(*(binds(s) for s in example)) if example else set()
        own_af = set().union(*(binds(s) for s in after)) if after else set()
        self.example, self.example_bound = self.ordered(
            example, (bound - own_ex) | {"example", "seed"}, scope)
        self.after, self.after_bound = self.ordered(
            after, (bound - own_af) | set(self.batch_params), scope)

    def ordered(self, stmts: list[ast.stmt], bound: set[str],
                scope: set[str]) -> tuple[list[_Line], set[str]]:
        out: list[_Line] = []
        bound = set(bound)
        for s in stmts:
            missing = reads_unbound(s, bound) & scope
            if missing:
                if any(isinstance(n, ast.Return) for n in ast.walk(s)):
                    self.blocked += 1  # what the function gives back is lost with it
                out.append(f"line {getattr(s, 'lineno', '?')}: left out "
                           f"`{_one_line(ast.unparse(s))}`: it reads "
                           f"{', '.join(sorted(missing))}, which only the TF1 code the port "
                           "replaces binds here")
                continue
            bound |= binds(s)
            out.append(s)
        return out, bound


class _ChainCode(_chain._Render):
    """The plan's chain as code: the map functions named as the port defines them, and the
    per-batch map after the batch."""

    def __init__(self, ds: str, p: m.Pipeline, v: m.Variant, seeded: set[str] | None = None,
                 after: str = "", after_seeded: bool = False):
        super().__init__(ds, p, v)
        self.seeded = seeded or set()
        self.after, self.after_seeded = after, after_seeded

    def source(self, s: m.Source) -> list[str]:
        out = super().source(s)
        data = s.data
        if s.kind == "range" and data is not None and not (
                data.known and isinstance(data.value, int)):
            # range_input_producer took an int32 tensor; Dataset.range wants int64
            out[0] = f"{self.ds} = tf.data.Dataset.range(tf.cast({data.text}, tf.int64))"
        return out

    def batch(self, st: m.BatchStage) -> list[str]:
        out = super().batch(st)
        if self.after and self.after_seeded:  # a seed per batch for its stateless draws
            root = self.v.root_seed.text if self.v.root_seed is not None else "None"
            out.append(f"{self.ds} = tf.data.Dataset.zip(({self.ds}, "
                       f"tf.data.Dataset.random(seed={root}).batch(2)))")
        if self.after:
            out.append(self.op(f"map({self.after}, num_parallel_calls={_chain.AUTOTUNE})"))
        return out


def _group(pipelines: list[m.Pipeline]) -> list[list[m.Pipeline]]:
    """Pipelines of one function whose variants exclude each other (``if shuffle:`` around two
    batchers) go together; others stay apart."""
    groups: list[list[m.Pipeline]] = []
    for p in pipelines:
        for g in groups:
            if g[0].function == p.function and p.function != MODULE and all(
                    _exclusive(a, b) for q in g for a in q.variants for b in p.variants):
                g.append(p)
                break
        else:
            groups.append([p])
    return groups


def _exclusive(a: m.Variant, b: m.Variant) -> bool:
    wa = dict(a.when)
    return any(c in wa and wa[c] != val for c, val in b.when)


def emit(report: m.Report) -> Emitted:
    """The port of the script a :class:`compare.migrate.MigrationReport` describes."""
    mod = m.req(report.module)
    e = _Emitter(mod, report.script)
    groups = _group(report.pipelines)
    e.pipeline_names = {g[0].function for g in groups if "." not in g[0].function}
    for g in groups:
        e.group(g)
    text = e.module()
    todos = [(i, ln.strip()[len(TODO):]) for i, ln in enumerate(text.splitlines(), 1)
             if ln.strip().startswith(TODO)]
    notes = list(e.notes)
    if not report.pipelines:
        notes.append("the script builds no input pipeline: the port has no pipeline function")
    return Emitted(report.script, text, e.pipelines, todos, notes)


# -- small helpers ---------------------------------------------------------------------------

def _info(mod: Module, function: str) -> FuncInfo | None:
    if function == MODULE:
        return mod.module
    return mod.by_name.get(function) or next(
        (f for f in mod.functions if f.qualname == function), None)


def _stmts(lines: list[_Line]) -> list[ast.stmt]:
    """The statements of a part not checked yet (:meth:`_Nodes.prune` adds its TODOs)."""
    return [s for s in lines if not isinstance(s, str)]


def _needed(stmts: list[ast.stmt], needed: set[str], params: set[str]) -> list[ast.stmt]:
    """The setup statements that bind what the rest needs, the checks and mutations of those
    names (``for f in filenames: if not exists(f): raise``), and Python's random seeding."""
    out = []
    needed = set(needed)
    own = set().union(*(binds(s) for s in stmts)) if stmts else set()
    for s in reversed(stmts):
        made = binds(s) - _loop_targets(s)
        reads = loads(s)
        if made & needed or (not made and (reads & needed & own or _checks(s))) or _seeds(s):
            out.append(s)
            needed |= reads
    return out[::-1]


def _loop_targets(s: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(s):
        if isinstance(n, (ast.For, ast.AsyncFor)):
            out |= {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for i in n.items:
                if i.optional_vars is not None:
                    out |= {x.id for x in ast.walk(i.optional_vars) if isinstance(x, ast.Name)}
    return out


def _unresolved(p: m.Pipeline) -> list[str]:
    return list(dict.fromkeys(f"{u.what}: {u.why}" for u in p.unresolved))


def _checks(s: ast.stmt) -> bool:
    """An argument check: an ``assert``, or a statement that may raise."""
    return isinstance(s, ast.Assert) or any(isinstance(n, ast.Raise) for n in ast.walk(s))


def _seeds(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and ast.unparse(
        s.value.func) in _SEEDING


def _free(node: ast.AST) -> set[str]:
    """The names a statement (or a copied function) reads from outside: what it loads, less
    what its lambdas, comprehensions and its own body bind."""
    inner = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            inner |= _params(n)
        elif isinstance(n, ast.comprehension):
            inner |= {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        inner |= {x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(
            x.ctx, ast.Store)}
    return _loads(node) - inner


def _fill_empty_blocks(lines: list[str]) -> list[str]:
    """``pass`` in a block that holds only comments (a branch whose only difference is a
    TODO)."""
    out: list[str] = []
    for i, ln in enumerate(lines):
        out.append(ln)
        text = ln.strip()
        if not text.endswith(":") or text.startswith("#"):
            continue
        indent = len(ln) - len(ln.lstrip())
        j, code = i + 1, False
        while j < len(lines) and (not lines[j].strip() or
                                  len(lines[j]) - len(lines[j].lstrip()) > indent):
            code = code or bool(lines[j].strip() and not lines[j].strip().startswith("#"))
            j += 1
        if not code:
            out.append(" " * (indent + len(INDENT)) + "pass")
    return _move_passes(out)


def _move_passes(lines: list[str]) -> list[str]:
    """Each inserted ``pass`` after the comments of its block."""
    out = list(lines)
    i = 0
    while i < len(out):
        if out[i].strip() == "pass" and i + 1 < len(out) and out[i + 1].strip().startswith(
                "#") and _indent(out[i + 1]) == _indent(out[i]):
            out[i], out[i + 1] = out[i + 1], out[i]
            i = max(i - 1, 0)
            continue
        i += 1
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _loads_of_lines(lines: list[str]) -> set[str]:
    """The names tf.data code lines read (lines with ``...`` read what the rest reads)."""
    out = set()
    for ln in lines:
        text = ln.strip()
        if text.startswith(("if ", "else", "elif ")):
            text = text.rstrip(":").split(" ", 1)[1] if " " in text else ""
        try:
            out |= loads(ast.parse(text.split("  #")[0]))
        except SyntaxError:
            continue
    return out


def _one_line(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first[:70] + (" ..." if len(first) > 70 or "\n" in text else "")


def _self_members(node: ast.AST, calls: bool) -> set[str]:
    """``self.x`` names a statement calls (``calls``) or reads as attributes."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(
        n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
        and (id(n) in called) == calls}


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
        stmt.value.value, str)


def _live(stmts: Sequence[_Line]) -> list[_Line]:
    """Leave out assignments of plain names that nothing after them reads and that call no
    TensorFlow op (a helper's ``num_preprocess_threads = cpu_count()`` that only sized a queue
    runner)."""
    out: list[_Line] = []
    needed: set[str] = set()
    for s in reversed(stmts):
        if not isinstance(s, str) and (
                isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets)
                and not {getattr(t, "id", "") for t in s.targets} & needed and "tf." not in ast.unparse(s.value)
                and not isinstance(getattr(s.value, "func", None), ast.Attribute)):
            continue
        if not isinstance(s, str):
            needed |= _loads(s)
        out.append(s)
    return out[::-1]


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Load)}


def _params(node: ast.AST) -> set[str]:
    a = getattr(node, "args", None)
    if a is None:
        return set()
    return {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {
        x.arg for x in (a.vararg, a.kwarg) if x is not None}


def _module_bindings(mod: Module, name: str) -> list[ast.stmt]:
    """The top-level statements of the script that bind ``name`` (its ``__main__`` block
    excluded), in order."""
    out: list[ast.stmt] = []
    for s in mod.tree.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _root(
                s.value.func) == name:
            out.append(s)  # parser.add_argument(...): configures the name
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if s.name == name:
                out.append(s)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name).split(".")[0] == name for a in s.names):
                out.append(s)
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and name in \
                stored_names(s):
            out.append(s)
    if any(isinstance(s, ast.Assign) and ast.unparse(s.value).endswith("flags.FLAGS")
           for s in out):  # FLAGS = tf.app.flags.FLAGS: its flags are defined by DEFINE_* calls
        out += [s for s in mod.tree.body if isinstance(s, ast.Expr) and isinstance(
            s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) and
            s.value.func.attr.startswith("DEFINE_")]
        out.sort(key=lambda s: s.lineno)
    return out


_PARSERS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "docopt"})


def _parses_command_line(s: ast.stmt) -> bool:
    """``a = parser.parse_args()`` (or docopt): what it binds comes from the command line."""
    value = getattr(s, "value", None)
    return isinstance(s, (ast.Assign, ast.AnnAssign)) and value is not None and any(
        isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", ""))
        in _PARSERS for n in ast.walk(value))


def _command_line_name(mod: Module, name: str) -> bool:
    """A module-level name the command line fills: argparse's result, or TF / absl FLAGS
    (which raise when read before the flags are parsed)."""
    for s in _module_bindings(mod, name):
        if _parses_command_line(s):
            return True
        value = getattr(s, "value", None)
        if isinstance(s, ast.Assign) and value is not None and ast.unparse(value).endswith(
                "FLAGS"):
            return True
    return False


def _undefined(mod: Module, name: str) -> bool:
    return name not in _BUILTINS and name != "tf" and not _module_bindings(mod, name) and \
        name not in mod.by_name and name not in mod.classes and not mod.scan.assumed_tf


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def _import_text(s: ast.Import | ast.ImportFrom, name: str) -> str:
    """The import of ``name`` alone; TensorFlow's own imports are left out (the port names
    TensorFlow ``tf``), as are ``six.moves`` names (``xrange`` became ``range``)."""
    alias = next(a for a in s.names if (a.asname or a.name).split(".")[0] == name)
    module = s.module if isinstance(s, ast.ImportFrom) else alias.name
    if (module or "").split(".")[0] in ("tensorflow", "six", "__future__"):
        return ""
    if isinstance(s, ast.ImportFrom):
        return ast.unparse(ast.ImportFrom(s.module, [alias], s.level))
    return ast.unparse(ast.Import([alias]))


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


def _where(ps: list[m.Pipeline]) -> str:
    p = ps[0]
    what = "its top-level code" if p.function == MODULE else f"{p.function}()"
    sites = "; ".join(f"line {q.line}: {q.end.construct}" for q in ps)
    return f"the input pipeline of {what} ({sites})"


def _tuple_element(v: m.Variant) -> bool:
    if getattr(v, "branches", None):
        return True  # the streams' elements, zipped
    s = v.source
    if s.kind == "rows" and s.data is not None and s.data.text.startswith(("[", "(")):
        return "," in s.data.text
    reads = [st for st in v.stages if isinstance(st, m.ReadStage)]
    return bool(reads and reads[0].key_used)


def _steps_text(v: m.Variant) -> str:
    fns = [f"{s.function} line {s.line}" for st in v.maps() for s in st.steps[:1]]
    return "the script's per-example code" + (f" from {', '.join(fns)}" if fns else "")


def _docstring(script: str, pipelines: list[EmittedPipeline]) -> str:
    names = ", ".join(f"{p.name}()" for p in pipelines) or "none"
    text = (f"tf.data port of the input pipelines of {script}, written by "
            f"python -m compare.migrate {script} --emit. Pipeline functions: {names}. Each "
            "returns a tf.data.Dataset with the elements the script's queues delivered. "
            "Search for TODO(migrate) for what was left to do by hand.")
    return '"""' + "\n".join(textwrap.wrap(text, 96)) + '\n"""'


__all__ = ["Emitted", "EmittedPipeline", "TODO", "emit"]
