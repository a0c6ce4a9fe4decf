"""``compare.migrate SCRIPT --emit OUT.py``: a runnable tf.data port of a TF1 script's input
pipelines, written from the typed plans (:mod:`.model`) and the symbolic runs behind them.

For each pipeline function of the script, a function of the same name and parameters that
returns a ``tf.data.Dataset`` (a pipeline built in the script's top-level code becomes
``pipeline()``). Its body: the script's own setup statements (file lists, constants, checks),
the per-example code lifted from the script's functions (:mod:`.lift`) as a function given to
``Dataset.map``, the code that ran on each batch as a map after ``batch``, and the tf.data chain
of the plan (:mod:`.chain`). Names are TF 2.21's and random draws stateless (:mod:`.rewrite`).
The script's helpers that the lifted code calls (``augmentbody``), the module constants and the
imports it uses are copied, rewritten the same way.

What cannot be converted gets ``# TODO(migrate): ...`` at the spot; a pipeline whose source this
file cannot settle raises NotImplementedError when called, after its TODOs. The module always
imports: nothing in it runs until a pipeline function is called.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import textwrap

from compare.migration import chain as _chain
from compare.migration import model as m
from compare.migration.lift import Lifted, Lifter, clone, stored_names
from compare.migration.rewrite import DRAWS, RESIZE_HELPER, RESIZE_V1, Rewriter, summary_call
from compare.migration.values import MODULE, Module

TODO = "# TODO(migrate): "
INDENT = "    "
_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__"}

DRAWS_HELPER = f'''
class _ExampleDraws:
    """Seeds for the stateless random ops that replace the script's stateful ones. Each example
    carries a seed of its own (shape [2], zipped to it from tf.data.Dataset.random); its n-th
    draw takes tf.random.experimental.stateless_fold_in(seed, n), and a draw the script gave a
    seed of its own takes the one seed per example that every draw with that seed shares."""

    def __init__(self):
        self._examples = []

    @contextlib.contextmanager
    def example(self, seed):
        self._examples.append([seed, 0, {{}}])
        try:
            yield
        finally:
            self._examples.pop()

    def seed(self, shared=None):
        if not self._examples:
            raise RuntimeError("a random draw outside the per-example map of a pipeline")
        example = self._examples[-1]
        key = shared if isinstance(shared, (int, str)) else id(shared)
        if shared is not None and key in example[2]:
            return example[2][key]
        example[1] += 1
        value = tf.random.experimental.stateless_fold_in(example[0], example[1])
        if shared is not None:
            example[2][key] = value
        return value


{DRAWS} = _ExampleDraws()
'''


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

    def to_dict(self) -> dict:
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


class _Emitter:
    def __init__(self, mod: Module, script: str):
        self.mod, self.script = mod, script
        self.functions: list[str] = []
        self.pipelines: list[EmittedPipeline] = []
        self.notes: list[str] = []
        self.helpers: dict[str, tuple[str, int, set[str]]] = {}  # name -> (code, draws, uses)
        self.globals_needed: list[str] = []
        self.taken = set(mod.by_name) | set(mod.classes) | set(mod.consts) | set(mod.imports)
        self.uses_draws = False
        self.uses_resize = False

    # -- statements -------------------------------------------------------------------------
    def code(self, stmts: list[ast.stmt], locals_: set[str],
             live: bool = False) -> tuple[list[str], int, set[str]]:
        """Statements rewritten to TF 2 (with their TODOs), the number of random draws in them,
        and the global names they use."""
        lines, draws, used = [], 0, set()
        for stmt in _live(stmts) if live else stmts:
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
            self.uses_resize |= rw.resizes > 0
            lines += [f"{TODO}{t}" for t in dict.fromkeys(rw.todos)]
            for s in new if isinstance(new, list) else [new] if new is not None else []:
                text = ast.unparse(ast.fix_missing_locations(s))
                lines += text.split("\n")
                used |= _loads(s)
        return lines, draws, used - locals_

    # -- helpers and globals ----------------------------------------------------------------
    def need(self, names: set[str]) -> int:
        """Copy what these global names stand for; the random draws the copied helpers make."""
        draws = 0
        for name in sorted(names):
            if name in _BUILTINS or name in ("tf", DRAWS, RESIZE_V1):
                continue
            if name in self.mod.by_name:
                draws += self.helper(name)
            elif name not in self.globals_needed:
                self.globals_needed.append(name)
                stmts = _module_bindings(self.mod, name)
                for s in stmts:
                    if isinstance(s, ast.ClassDef):
                        draws += self.helper(name, s)
                    elif not isinstance(s, (ast.Import, ast.ImportFrom)):
                        draws += self.need(_loads(s) - stored_names(s))
        return draws

    def helper(self, name: str, node: ast.AST | None = None) -> int:
        """Copy the script's function (or class) ``name``, rewritten; its draws (with its
        callees')."""
        if name in self.helpers:
            return self.helpers[name][1]
        self.helpers[name] = ("", 0, set())  # recursion guard
        if node is None:
            node = self.mod.by_name[name].node
        copy = clone(node)
        if getattr(copy, "decorator_list", None):
            copy.decorator_list = []
        lines, draws, used = self.code([copy], stored_names(node) | _params(node))
        self.helpers[name] = ("\n".join(lines), draws, used)
        total = draws + self.need(used - {name})
        self.helpers[name] = ("\n".join(lines), total, used)
        return total

    # -- pipelines --------------------------------------------------------------------------
    def pipeline(self, p: m.Pipeline) -> None:
        info = self.mod.by_name.get(p.function) if p.function != MODULE else self.mod.module
        name = "pipeline" if p.function == MODULE else p.function.rsplit(".", 1)[-1]
        if p.function != MODULE:
            self.taken.discard(name)
        name = _unique(name, {e.name for e in self.pipelines} | (
            self.taken if p.function == MODULE else set()))
        params = ast.unparse(info.node.args) if info is not None and p.function != MODULE else ""
        doc = textwrap.wrap(f"The tf.data port of {_where(p)}.", 92)
        head = [f"def {name}({params}):", f'{INDENT}"""' + f"\n{INDENT}".join(doc) + '"""']
        if info is None or (p.function != MODULE and p.function not in self.mod.by_name):
            body = [f"{TODO}{p.function} is a method or nested function: port it by hand "
                    "from the plan (python -m compare.migrate SCRIPT)",
                    f"raise NotImplementedError({p.function!r})"]
            lifted_first, complete = None, False
        else:
            body, lifted_first, complete = self.variants(p, name)
        self.functions.append("\n".join(head + [INDENT + ln if ln else "" for ln in body]))
        self.pipelines.append(EmittedPipeline(
            name, p.function, tuple(info.params) if info is not None else (), p.line,
            bool(lifted_first and lifted_first.entry_returns), complete,
            lifted_first.end_line if lifted_first else 0,
            ast.unparse(lifted_first.output) if lifted_first and lifted_first.output else ""))

    def variants(self, p: m.Pipeline, name: str) -> tuple[list[str], Lifted | None, bool]:
        if len(p.variants) == 1:
            return self.variant(p, p.variants[0], name, "")
        body, first, complete = [], None, True
        for i, v in enumerate(p.variants):
            cond = " and ".join(c if val else f"not ({c})" for c, val in v.when) or "True"
            keyword = "if" if i == 0 else ("else" if i == len(p.variants) - 1 else "elif")
            body.append(f"{keyword} {cond}:" if keyword != "else" else "else:")
            lines, lifted, ok = self.variant(p, v, name, f"_{i + 1}")
            body += [INDENT + ln if ln else "" for ln in lines]
            first = first or lifted
            complete = complete and ok
        return body, first, complete

    def variant(self, p: m.Pipeline, v: m.Variant, name: str,
                suffix: str) -> tuple[list[str], Lifted | None, bool]:
        if v.origin is None:
            return [f"{TODO}this pipeline was not planned", "raise NotImplementedError"], \
                None, False
        lifted = Lifter(self.mod, p, v).lift()
        locals_ = _locals(lifted) | set(p.params)
        setup, d0, used = self.code([c.apply(s) for s, c, _ in lifted.setup], locals_)
        lines = setup[:]
        example_name, after_name = f"{name}_example{suffix}", f"{name}_batch{suffix}"
        example, seeded, used_ex = self.example_fn(lifted, example_name, v, locals_, d0)
        after, used_af = self.after_fn(lifted, after_name, locals_)
        chain_lines, fatal, used_ch = self.chain(p, v, lifted, example_name if example else "",
                                                 after_name if after else "", seeded, locals_)
        self.need(used | used_ex | used_af | used_ch)
        lines += [f"{TODO}{t}" for t in lifted.todos]
        lines += example + after + chain_lines
        if not fatal:
            lines.append("return ds")
        return lines, lifted, not fatal

    def example_fn(self, lifted: Lifted, name: str, v: m.Variant, locals_: set[str],
                   setup_draws: int = 0) -> tuple[list[str], bool, set[str]]:
        """The map function; seeded when it, a helper it calls or a function the setup
        defines (pix2pix's ``transform``) draws."""
        if lifted.returns is None:
            return [], False, set()
        stmts = list(lifted.element) + [c.apply(s) for s, c, _ in lifted.example]
        stmts.append(ast.Return(lifted.returns))
        body, draws, used = self.code(stmts, locals_, live=True)
        draws += self.need(used) + setup_draws
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

    def after_fn(self, lifted: Lifted, name: str, locals_: set[str]) -> tuple[list[str], set[str]]:
        params = lifted.batch_params
        if params is None or not lifted.after:
            return [], set()
        stmts = [c.apply(s) for s, c, _ in lifted.after]
        if not isinstance(stmts[-1], ast.Return):
            stmts.append(ast.Return(lifted.output))
        last = stmts[-1]
        if len(stmts) == 1 and isinstance(last.value, (ast.Tuple, ast.Name)) and ast.unparse(
                last.value).strip("()").replace(" ", "") == ",".join(params):
            return [], set()  # hands out the batch as it is
        body, _draws, used = self.code(stmts, locals_, live=True)
        sig = ", ".join(params) if all(p.isidentifier() for p in params) else "*batch"
        return ([f"def {name}({sig}):", f'{INDENT}"""One batch, as the script finished it."""']
                + [INDENT + ln for ln in body] + [""]), used

    def chain(self, p: m.Pipeline, v: m.Variant, lifted: Lifted, example: str, after: str,
              seeded: bool, locals_: set[str]) -> tuple[list[str], bool, set[str]]:
        maps = v.maps()
        stages = list(v.stages)
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
        shown = dataclasses.replace(v, stages=stages)
        render = _ChainCode("ds", p, shown, {example} if seeded else set(), after)
        lines = render.lines()
        bad = [ln for ln in lines if "..." in ln or "unresolved" in ln]
        if bad or v.source.kind in ("unknown", "provider", "generator"):
            todo = [f"{TODO}{u.what}: {u.why}" for u in p.unresolved] or [
                f"{TODO}the {v.source.kind} source of this pipeline: {ln.strip()}" for ln in bad]
            what = "; ".join(u.what for u in p.unresolved)[:120] or "the source"
            return todo + [f"{TODO}the tf.data chain of the plan, to finish:"] + [
                "# " + ln for ln in lines] + [
                f"raise NotImplementedError({('compare.migrate could not settle ' + what)!r})"], \
                True, set()
        code, _d, used = self.code(ast.parse("\n".join(lines)).body, locals_ | {"ds"})
        return [f"{TODO}{u.what}: {u.why}" for u in p.unresolved] + code, False, used

    # -- the module -------------------------------------------------------------------------
    def module(self) -> str:
        parts = [_docstring(self.script, self.pipelines)]
        imports = ["import tensorflow as tf"]
        if self.uses_draws:
            imports.insert(0, "import contextlib")
        body, seen = [], set()
        stmts = sorted({id(s): s for n in self.globals_needed
                        for s in _module_bindings(self.mod, n)}.values(), key=lambda s: s.lineno)
        for s in stmts:
            name = next(n for n in self.globals_needed if s in _module_bindings(self.mod, n))
            if True:
                if id(s) in seen or isinstance(s, ast.ClassDef):
                    continue
                seen.add(id(s))
                if isinstance(s, (ast.Import, ast.ImportFrom)):
                    text = _import_text(s, name)
                    if text and text not in imports:
                        imports.append(text)
                else:
                    lines, _d, _u = self.code([_clone(s)], set())
                    body += lines
        parts.append("\n".join(imports))
        if body:
            parts.append("\n".join(body))
        if self.uses_draws:
            parts.append(DRAWS_HELPER.strip("\n"))
        if self.uses_resize:
            parts.append(RESIZE_HELPER.strip("\n"))
        parts += [code for code, _d, _u in self.helpers.values() if code]
        parts += self.functions
        return "\n\n\n".join(parts) + "\n"


class _ChainCode(_chain._Render):
    """The plan's chain as code: the map functions named as the port defines them, and the
    per-batch map after the batch."""

    def __init__(self, ds: str, p: m.Pipeline, v: m.Variant, seeded: set[str], after: str):
        super().__init__(ds, p, v)
        self.seeded = seeded
        self.after = after

    def batch(self, st: m.BatchStage) -> list[str]:
        out = super().batch(st)
        if self.after:
            out.append(self.op(f"map({self.after}, num_parallel_calls={_chain.AUTOTUNE})"))
        return out


def emit(report) -> Emitted:
    """The port of the script a :class:`compare.migrate.MigrationReport` describes."""
    mod = report.module
    e = _Emitter(mod, report.script)
    for p in report.pipelines:
        e.pipeline(p)
    text = e.module()
    todos = [(i, ln.strip()[len(TODO):]) for i, ln in enumerate(text.splitlines(), 1)
             if ln.strip().startswith(TODO)]
    notes = list(e.notes)
    if not report.pipelines:
        notes.append("the script builds no input pipeline: the port has no pipeline function")
    return Emitted(report.script, text, e.pipelines, todos, notes)


# -- small helpers ---------------------------------------------------------------------------

def _clone(node: ast.AST) -> ast.AST:
    return clone(node)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
        stmt.value.value, str)


def _live(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Leave out assignments of plain names that nothing after them reads and that call no
    TensorFlow op (a helper's ``num_preprocess_threads = cpu_count()`` that only sized a queue
    runner)."""
    out, needed = [], set()
    for s in reversed(stmts):
        if (isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets)
                and not {t.id for t in s.targets} & needed and "tf." not in ast.unparse(s.value)
                and not isinstance(getattr(s.value, "func", None), ast.Attribute)):
            continue
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


def _locals(lifted: Lifted) -> set[str]:
    out = set()
    for part in (lifted.setup, lifted.example, lifted.after):
        for s, c, _ in part:
            out |= stored_names(c.apply(s))
    for s in lifted.element:
        out |= stored_names(s)
    return out | set(lifted.batch_params or ()) | {"example", "seed"}


def _module_bindings(mod: Module, name: str) -> list[ast.stmt]:
    """The top-level statements of the script that bind ``name`` (its ``__main__`` block
    excluded), in order."""
    out = []
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
    return out


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


def _where(p: m.Pipeline) -> str:
    what = "its top-level code" if p.function == MODULE else f"{p.function}()"
    return f"the input pipeline of {what} (line {p.line}: {p.end.construct})"


def _tuple_element(v: m.Variant) -> bool:
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
