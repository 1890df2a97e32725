"""Where a box stands in a completion: on its own (its content is an answer), or inside another command's argument
or a comment, where it is not the answer shown (then the completion's answer is unknown: never the box's content).

A box in the argument of a command that changes or hides what it holds (``\\frac{1}{\\boxed{3}}``,
``\\sqrt{\\boxed{9}}``, ``x^{\\boxed{2}}``, ``\\phantom{\\boxed{3}}``, ``\\cancel{\\boxed{3}}``,
``\\textcolor{white}{\\boxed{3}}``, after a ``\\color`` switch that still holds) or in a comment (HTML, ``\\iffalse ... \\fi``, a ``comment`` environment) is no
answer; one in a bare group or a command that shows its argument as it is (``{\\boxed{3}}``, ``\\textbf{\\boxed{3}}``,
``\\displaystyle{...}``) stands on its own. This is read from the braces alone. What stands beside a box is not read:
outside red-team rounds 4 and 5 of the math reward showed that lists of operators and separators, and finding math
spans in Markdown, both miss operators and lose common right answers (a money amount before a box, a unit after
it), so a box beside an operator (``x = -\\boxed{3}``) still counts as its content (README, known limits).
Standard library only (the math workers load this without the trl_ext package).
"""

import functools
import re

# commands whose argument shows its content as it is (a box inside them stands on its own)
_TRANSPARENT = re.compile(
    r"text(?:bf|it|rm|sf|tt|normal|up|sl|sc|md)?|mbox|emph|math(?:bf|rm|it|sf|tt|bb|cal|frak|scr|normal)|boldsymbol"
    r"|bm|displaystyle|textstyle|large|Large|LARGE|huge|Huge|small|normalsize|underline"
)
_COMMAND_BEFORE = re.compile(r"\\([A-Za-z]+)\s*$")
_HIDING = re.compile(
    r"<!--.*?(?:-->|$)|\\iffalse(?![A-Za-z]).*?(?:\\fi(?![A-Za-z])|$)|\\begin\{comment\}.*?(?:\\end\{comment\}|$)",
    re.DOTALL,
)


def box_in_context(text: str, command_start: int, content: tuple[int, int], enclosed: bool = True) -> str | None:
    """The box's content, or None when the box is inside another command's argument or a comment (``content``: the
    span inside its braces; ``enclosed``: False when the caller counted as many braces closed as opened before the
    box, so that no group can hold it)."""
    if enclosed:
        opened = [brace for brace, close in brace_groups(text) if brace < command_start < close]
        if not all(_shows_as_it_is(text, at) for at in opened):
            return None
    if any(start < command_start < end for start, end in _comments(text)) or _coloured(text, command_start):
        return None
    return text[content[0] : content[1]]


_COLOR = re.compile(r"\\color(?![A-Za-z])")
_MATH_END = re.compile(r"(?<!\\)\$|\\[)\]]|\n\s*\n")  # where math ends: a dollar, \) or \], a blank line


def _coloured(text: str, command_start: int) -> bool:
    """Whether a ``\\color{...}`` declaration before the box still holds at it (declared in a group that holds the
    box too, or outside every group): a colour switch changes what follows as ``\\textcolor`` changes its argument
    (``\\color{white}\\boxed{3}`` hides the box; red team round 3 of the math reward)."""
    if "\\color" not in text[:command_start]:
        return False
    groups = brace_groups(text)
    for declaration in _COLOR.finditer(text, 0, command_start):
        held = [(start, end) for start, end in groups if start < declaration.start() < end]
        if held and min(held, key=lambda group: group[1] - group[0])[1] > command_start:
            return True  # declared in a group that holds the box
        if not held and not _MATH_END.search(text, declaration.end(), command_start):
            return True  # declared outside every group: it holds to the end of its math
    return False


@functools.lru_cache(maxsize=8)
def brace_groups(text: str) -> tuple[tuple[int, int], ...]:
    """(opening, closing) of every brace group of ``text`` that closes (an escaped brace, ``\\{``, is none; a
    group never closed is a LaTeX error that encloses nothing)."""
    stack: list[int] = []
    groups = []
    for brace in re.finditer(r"(?<!\\)[{}]", text):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            groups.append((stack.pop(), brace.start()))
    return tuple(sorted(groups))


def _shows_as_it_is(text: str, brace: int) -> bool:
    """Whether the group opened at ``brace`` shows its content as it is: a bare group, or the argument of a
    command that does (``\\text{...}``, ``\\mathbf{...}``); not a further argument (``\\frac{1}{...}``), an
    exponent or index, or any other command's argument (``\\sqrt``, ``\\phantom``, ``\\cancel``)."""
    before = text[max(0, brace - 40) : brace].rstrip()
    if before.endswith(("}", "]", "^", "_")):
        return False
    command = _COMMAND_BEFORE.search(before)
    return command is None or _TRANSPARENT.fullmatch(command.group(1)) is not None


@functools.lru_cache(maxsize=8)
def _comments(text: str) -> tuple[tuple[int, int], ...]:
    if "<!--" not in text and "iffalse" not in text and "comment" not in text:
        return ()
    return tuple(match.span() for match in _HIDING.finditer(text))
