"""Chat templates rendered with bounds: a template from a model folder is untrusted code.

:func:`render_chat_template` renders a tokenizer's Jinja chat template the way transformers does (an immutable
sandbox, ``trim_blocks``/``lstrip_blocks``, ``loopcontrols``, the ``tojson`` filter, ``raise_exception``,
``strftime_now``, the tokenizer's special tokens in the context), in a sandbox that also bounds the work:

- every loop step (``{% for %}`` and every item drawn from ``range``) counts against :data:`MAX_TEMPLATE_STEPS`;
- the rendering stops after :data:`MAX_TEMPLATE_SECONDS` (checked at each step and operation);
- a string or list built by ``*``, ``+``, ``~`` or a filter holds at most :data:`MAX_TEMPLATE_CHARS` items, an
  integer power at most 4096 bits, and the rendered text at most :data:`MAX_TEMPLATE_CHARS` characters.

A template that breaks a bound, that the sandbox blocks (``SecurityError``), that raises (``raise_exception``), or
that fails otherwise (overflow, memory, a syntax error) is one ``ValueError`` naming the template and the reason.
"""
from __future__ import annotations

import json
import math
import time
from datetime import datetime

__all__ = ["render_chat_template", "MAX_TEMPLATE_CHARS", "MAX_TEMPLATE_STEPS", "MAX_TEMPLATE_SECONDS"]

#: Most characters of one rendered prompt (and of any string or list the template builds).
MAX_TEMPLATE_CHARS = 1_000_000
#: Most loop steps of one rendering (all loops and ranges together).
MAX_TEMPLATE_STEPS = 1_000_000
#: Most seconds one rendering may take.
MAX_TEMPLATE_SECONDS = 10.0
#: Most bits of an integer power.
_MAX_POWER_BITS = 4096


class TemplateLimitError(Exception):
    """A chat template went past a bound (steps, time, size)."""


class _Budget:
    def __init__(self):
        self.steps = 0
        self.deadline = time.monotonic() + MAX_TEMPLATE_SECONDS

    def tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > MAX_TEMPLATE_STEPS:
            raise TemplateLimitError(f"it takes more than {MAX_TEMPLATE_STEPS} loop steps")
        if time.monotonic() > self.deadline:
            raise TemplateLimitError(f"it runs longer than {MAX_TEMPLATE_SECONDS:g} s")

    def size(self, value):
        if isinstance(value, (str, list, tuple)) and len(value) > MAX_TEMPLATE_CHARS:
            raise TemplateLimitError(f"it builds a {type(value).__name__} of more than {MAX_TEMPLATE_CHARS} items")
        return value


def _environment(budget: _Budget):
    import jinja2  # installed with transformers' chat-template support (the [llm] extra)
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` (transformers' assistant-mask tag) renders its body."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "+", "**", "%"})

        def call_binop(self, context, operator, left, right):
            budget.tick(0)
            if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                    and right * math.log2(abs(left)) > _MAX_POWER_BITS:
                raise TemplateLimitError(f"it computes a power of more than {_MAX_POWER_BITS} bits")
            if operator == "*":
                seq, n = (left, right) if isinstance(right, int) else (right, left)
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_TEMPLATE_CHARS:
                    raise TemplateLimitError(f"it builds a {type(seq).__name__} of more than {MAX_TEMPLATE_CHARS} "
                                             "items")
            return budget.size(super().call_binop(context, operator, left, right))

        def call(self, __context, __obj, *args, **kwargs):
            budget.tick(0)
            return budget.size(super().call(__context, __obj, *args, **kwargs))

    env = Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])

    def counted(iterable):
        for item in iterable:
            budget.tick()
            yield item

    def bounded_range(*args):
        r = range(*args)
        if len(r) > MAX_TEMPLATE_STEPS:
            raise TemplateLimitError(f"it asks for a range of {len(r)} items (at most {MAX_TEMPLATE_STEPS})")
        return counted(r)

    def concat(*parts):
        budget.tick(0)
        return budget.size("".join(map(str, parts)))

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return budget.size(json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                                      sort_keys=sort_keys))

    def bounded_filter(fn):
        def run(*args, **kwargs):
            budget.tick(0)
            for value in (*args, *kwargs.values()):  # a width or count asked of a filter ('x'|center(10**9))
                if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_TEMPLATE_CHARS:
                    raise TemplateLimitError(f"it passes {value} to a filter (at most {MAX_TEMPLATE_CHARS})")
            return budget.size(fn(*args, **kwargs))
        for attr in ("jinja_pass_arg",):  # keep how jinja passes the context / environment
            if hasattr(fn, attr):
                setattr(run, attr, getattr(fn, attr))
        return run

    env.filters = {name: bounded_filter(fn) for name, fn in env.filters.items()}
    env.filters["tojson"] = bounded_filter(tojson)
    env.globals.update(range=bounded_range, raise_exception=raise_exception,
                       strftime_now=lambda fmt: datetime.now().strftime(fmt),
                       raptor_loop=counted, raptor_concat=concat)
    return env, nodes


def _compile(env, nodes, source: str):
    """The template with every loop counted and every ``~`` bounded (the parsed tree rewritten, then compiled)."""
    tree = env.parse(source)
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.Name("raptor_loop", "load"), [loop.iter], [], None, None)
    for parent in tree.find_all(nodes.Node):
        for field in parent.fields:
            value = getattr(parent, field, None)
            if isinstance(value, nodes.Concat):
                setattr(parent, field, nodes.Call(nodes.Name("raptor_concat", "load"), value.nodes, [], None, None))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, nodes.Concat):
                        value[i] = nodes.Call(nodes.Name("raptor_concat", "load"), item.nodes, [], None, None)
    return env.from_string(tree)


def render_chat_template(template: str, messages, *, add_generation_prompt: bool = True, name: str = "chat template",
                         **context) -> str:
    """Render a Jinja chat ``template`` for ``messages`` within the module's bounds.

    Parameters
    ----------
    template : str
        The Jinja source (``tokenizer.chat_template``).
    messages : list of dict
        The turns (``{"role": ..., "content": ...}``).
    add_generation_prompt : bool, default=True
        Passed to the template.
    name : str, default="chat template"
        What the template is, for messages (e.g. the model's path).
    **context
        More variables (the tokenizer's special tokens: ``bos_token``, ``eos_token``...).

    Returns
    -------
    str
        The rendered text.

    Raises
    ------
    ValueError
        Naming the template and the reason: a bound exceeded, blocked by the sandbox, raised by the template, or
        another rendering failure.

    Examples
    --------
    >>> render_chat_template("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\\n{% endfor %}",
    ...                      [{"role": "user", "content": "hi"}])
    'user: hi\\n'
    >>> render_chat_template("{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}", [])
    Traceback (most recent call last):
    ...
    ValueError: cannot render the chat template: it takes more than 1000000 loop steps
    """
    import jinja2

    budget = _Budget()
    try:
        env, nodes = _environment(budget)
        compiled = _compile(env, nodes, template)
        out, size = [], 0
        for chunk in compiled.generate(messages=messages, add_generation_prompt=add_generation_prompt, **context):
            size += len(chunk)
            if size > MAX_TEMPLATE_CHARS:
                raise TemplateLimitError(f"it renders more than {MAX_TEMPLATE_CHARS} characters")
            out.append(chunk)
        return "".join(out)
    except TemplateLimitError as exc:
        raise ValueError(f"cannot render the {name}: {exc}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise ValueError(f"cannot render the {name}: the sandbox blocks it ({exc})") from None
    except jinja2.exceptions.TemplateError as exc:
        raise ValueError(f"cannot render the {name}: {type(exc).__name__}: {exc}") from None
    except (OverflowError, MemoryError, RecursionError, ArithmeticError, TypeError, ValueError,
            AttributeError, KeyError, IndexError) as exc:
        raise ValueError(f"cannot render the {name}: {type(exc).__name__}: {exc}") from None
