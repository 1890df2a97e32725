"""String side of math answer checking: multi-part splitting, thousands separators, text, option letters, units.

math-verify parses and compares one expression at a time. What it does not do, and this module does (by hand,
because no maintained library does it; all of it is plain string work, the maths stays in math-verify):
- split an answer made of several parts (several ``\\boxed{}``, a bare comma list, ``\\{a, b\\}``, ``a \\pm b``,
  "x = 1 or x = 2", ``p=5,q=2;p=7,q=2``) into a multiset of parts compared one by one: math-verify keeps one
  box, or compares a comma list as a set that also equals a tuple or an interval;
- read ``1\\,000``, ``1{,}000``, ``1,\\! 000`` or ``1 000`` as one number (math-verify reads a product or a list);
- compare word answers as words (math-verify reads ``\\text{no}`` as n·o); option letters ((C), \\text{C}, c) and
  unparsed answers (a ``cases`` block) by exact normalised strings, never a number from free text; times as times;
- strip units only after a plain number and refuse a different unit: math-verify strips units on both sides
  (``5\\text{ cm}`` equals ``5\\text{ m}``) and reads ``3t`` or ``2\\text{ or more}`` as plain numbers;
- keep a degree sign inside an expression as a value (math-verify drops it: ``\\sin(90^\\circ - x)`` would
  equal ``\\sin(90 - x)``), read mixed numbers ``1 1/2``, and decide golds that are broken LaTeX.
Standard library only: the math workers load this file by path (the trl_ext package would import torch).
"""

import re
from decimal import Decimal
from fractions import Fraction

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"(?<!\\)[{}]")
# every text or font command (\text, \textbf, \textnormal, \mbox, \hbox, \mathrm, \operatorname, \rm, ...)
_TEXT_COMMANDS = r"\\(?:text[a-z]*|math(?:rm|bf|it|sf|tt|normal)|[mh]box|operatorname\*?|rm|emph)"
_TEXT_COMMAND = re.compile(_TEXT_COMMANDS + r"\s*\{")
_ESCAPED = re.compile(r"\\[$%]")
# groups of exactly three digits after a 1-3 digit head, joined by a comma, {,}, a thin/normal space or ~
_THOUSANDS = re.compile(r"(?<![\d.])([1-9]\d{0,2})((?:(?:(?:,|\{,\})(?:\\!\s*)?|\\[,!;: ]|~| )\d{3})+)(?![\d])")
_THOUSANDS_SEP = re.compile(r"\{,\}|\\[,!;: ]|[,~ ]")
_REPEATING = re.compile(r"(?<![\d.])(\d*)\.(\d*)\\overline\s*\{(\d+)\}")
# no spacing around the lazy body (stripped after): "\s*(.+?)\s*" was cubic on a run of spaces with no "\}"
_SET_BUILDER = re.compile(r"(?:\\left)?\\\{\s*[A-Za-z]\s*(?:\\mid|\\middle\||\||:)(.+?)(?:\\right)?\\\}")
_PLAIN_FRACTION = re.compile(
    r"([-+]?)\s*(?:(\d+)|\\[dt]?frac\s*\{\s*([-+]?\d+)\s*\}\s*\{\s*([-+]?\d+)\s*\}|(\d+)\s*/\s*(\d+))"
)
_EMPTY_SET = re.compile(r"\\varnothing|\\emptyset|\\O|(?:\\left)?\\\{\s*(?:\\right)?\\\}")
_DEGREE = r"(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\degree|°)"
_DEGREE_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*" + _DEGREE)
_BARE_DEGREES = re.compile(r"\s*[-+]?\s*\d+(?:\.\d+)?\s*" + _DEGREE + r"\s*")
_MIXED_NUMBER = re.compile(r"([-+]?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_CURRENCY_LABEL = re.compile(r"^[^=]*\\\$\s*=(?!=)")  # "\frac{1}{2} \$ = \frac{10}{9}": the value is after "="
_MEMBER_PREFIX = re.compile(r"^\s*[A-Za-z]\s*\\in(?![A-Za-z])\s*")
_LONG_DECIMAL = re.compile(r"([-+]?)(\d*)\.(\d+)(?:(?:\\times|\\cdot|\*)10\^\{?([-+]?\d+)\}?|[eE]([-+]?\d+))?")
_TIME = re.compile(r"(\d{1,2}):(\d\d)(?::(\d\d))?\s*(?:\\,|~)?\s*([ap])?\.?\s*(?:m\b\.?)?", re.IGNORECASE)
_PERCENT = re.compile(r"\\text\s*\{\s*(?:\\?%|percent)\s*\}|\\?%|\bpercent\b")
_OUTER_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# starts at the separator itself (spacing before it is stripped from the part): linear on long whitespace runs
_SEPARATOR = re.compile(
    r"(?:,|;|\\(?:text|mbox|textrm|mathrm)\s*\{\s*(?:and|or)\s*\}|(?<=\s)(?:and|or)(?=\s))(?:\s|\\q?quad|\\[,;: ])*"
)
# trailing spacing, matched on the reversed string (a "$"-anchored search is quadratic on long whitespace runs)
_TRAILING_SPACING_REVERSED = re.compile(r"(?:dauqq?\\|[,;: ]\\|\s)+")
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+(?:_\{?\w+\}?)?)\s*=(?!=)")
_SPACING = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])|\\[!,;: ]|\\q?quad|\\displaystyle|~|\s+")
_OPTION = re.compile(r"^\(([a-e])\)$|^([a-e])\)?$")
_OPTION_PREFIX = re.compile(r"^\(([a-e])\)")
_NOT_AN_ANSWER = re.compile(r"\b(?:proof|prove[dn]?|shown?|see|omitted|n/a|none given)\b")
_UNIT_ALIASES = {
    "centimeter": "cm", "centimetre": "cm", "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km",
    "millimeter": "mm", "millimetre": "mm", "inch": "in", "inche": "in", "foot": "ft", "feet": "ft",
    "second": "s", "sec": "s", "minute": "min", "hour": "h", "hr": "h", "kilogram": "kg", "gram": "g",
    "degree": "deg", "dollar": "$", "liter": "l", "litre": "l", "mile": "mi", "yard": "yd", "unit": "",
}  # fmt: skip
_SHORT_UNITS = {"cm", "m", "km", "mm", "in", "ft", "s", "min", "h", "hr", "hrs", "kg", "g", "mi", "yd", "l", "ml", "deg"}  # fmt: skip
_QUALIFIERS = {  # hedges, and number or operation words (they change the value: never a unit)
    "or", "and", "if", "when", "where", "for", "more", "less", "least", "most", "not", "only", "approximately",
    "approx", "about", "around", "at", "than", "all", "any", "each", "every", "but", "also", "unless", "otherwise",
    "is", "are", "be", "odd", "even", "none", "no", "yes", "exactly", "nearly", "roughly", "over", "under", "maybe",
    "probably", "ish", "plus", "minus", "times", "squared", "cubed", "percent", "lcm", "gcd", "mod", "log", "hundred",
    "thousand", "million", "billion", "trillion", "dozen", "half", "halves", "third", "thirds", "quarter", "quarters",
    "fourths", "tenths", "hundredths", "thousandths", "pi",
}  # fmt: skip
_UNIT_TAIL = re.compile(
    r"(?:(?:\\[,;: ]|~|\s)*" + _TEXT_COMMANDS + r"\s*\{\s*([A-Za-z][A-Za-z ./]*?)\s*\}"  # 5\textbf{ cm}
    r"|(?<=[\d}])\s+([A-Za-z]+(?:\s+[A-Za-z]+){0,2})"  # 5 cm, 10 square units
    r"|(?<=\d)([a-z]{2,}))"  # 5cm, 10weeks
    r"\s*((?:\^\s*\{?\s*[23]\s*\}?)?)\s*\.?\s*$"
)
MAX_PARTS = 16
MAX_ANSWER_CHARS = 2000


def strip_delimiters(text: str) -> str:
    """``text`` without surrounding math delimiters (``$...$``, ``\\(...\\)``, ``\\[...\\]``) and a final period."""
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for open_, close in _OUTER_DELIMITERS:
            if len(text) > len(open_) + len(close) and text.startswith(open_) and text.endswith(close):
                text, changed = text[len(open_) : -len(close)].strip(), True
        if text.endswith(".") and not text[-2:-1].isdigit():
            text, changed = text[:-1].rstrip(), True
    return text


def join_thousands(text: str) -> str:
    """``1,000``, ``1{,}000``, ``1,\\!000``, ``1,\\! 000``, ``1\\,000``, ``1 000`` -> ``1000`` (only groups of
    exactly three digits). A bare comma inside brackets stays a separator: ``(12,102)`` is a pair."""

    def join(match: re.Match) -> str:
        head = text[: match.start()]
        depth = head.count("(") + head.count("[") - head.count(")") - head.count("]")
        if depth > 0 and re.fullmatch(r"(?:,\d{3})+", match.group(2)):
            return match.group(0)
        return match.group(1) + _THOUSANDS_SEP.sub("", match.group(2))

    return _THOUSANDS.sub(join, text)


def split_top_level(text: str) -> list[str]:
    """Split ``text`` at commas, semicolons and "and"/"or" outside every bracket, brace and environment."""
    parts, depth, start, pos = [], 0, 0, 0
    while pos < len(text):
        separator = _SEPARATOR.match(text, pos) if depth == 0 else None
        if separator:
            parts.append(text[start:pos])
            start = pos = separator.end()
            continue
        if text.startswith(("\\begin{", "\\end{"), pos):
            depth += 1 if text[pos + 1] == "b" else -1
            pos = text.find("}", pos) + 1 or len(text)
            continue
        char = text[pos]
        if char == "\\":
            pos += 1 if text[pos + 1 : pos + 2] in ("(", "[", "{", "}", "]", ")") else 2  # \{ is a brace
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        pos += 1
    parts.append(text[start:])
    return [_strip_trailing_spacing(part).strip() for part in parts]


def _strip_trailing_spacing(part: str) -> str:
    match = _TRAILING_SPACING_REVERSED.match(part[::-1])
    return part[: len(part) - match.end()] if match else part


def outer_brackets(part: str) -> str | None:
    """The bracket pair around a whole tuple or interval (``(]`` for ``(-\\infty, 2]``), or None. math-verify
    reads both ``(2, -1)`` and ``[2, -1]`` as the tuple (2, -1) once the ends are not increasing."""
    text = _SPACING.sub("", part)
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]":
        return None
    depth = 0
    for pos, char in enumerate(text):
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth == 0 and pos < len(text) - 1:
            return None  # the first bracket closes early: (a, b) \cup (c, d)
    return text[0] + text[-1] if len(split_top_level(text[1:-1])) > 1 else None


def _outer_set(text: str) -> str | None:
    """The inside of ``\\{a, b\\}`` (a set written out) or of a brace group ``{a, b}``, or None when ``text`` is
    not one whole such set."""
    for open_, close in (("\\left\\{", "\\right\\}"), ("\\{", "\\}"), ("{", "}")):
        inner = text[len(open_) : -len(close)] if text.startswith(open_) and text.endswith(close) else None
        if inner is not None and balanced_braces(inner) and not re.search(r"\\mid|\||:", inner):
            return inner if len(split_top_level("(" + inner + ")")) == 1 else None
    return None


def expand_plus_minus(part: str) -> list[str]:
    """``a \\pm b`` -> ``a + b``, ``a - b`` (every ``\\pm`` takes the same sign, every ``\\mp`` the other one)."""
    if "\\pm" not in part and "\\mp" not in part:
        return [part]
    signs = ({"pm": "+", "mp": "-"}, {"pm": "-", "mp": "+"})
    return [re.sub(r"\\(pm|mp)(?![A-Za-z])", lambda m, sign=sign: sign[m.group(1)], part) for sign in signs]


def repeating_decimals(text: str) -> str:
    """``0.\\overline{3}`` -> ``\\frac{1}{3}`` (math-verify does not read the overline)."""

    def fraction(match: re.Match) -> str:
        whole, fixed, period = match.group(1) or "0", match.group(2), match.group(3)
        denominator = 10 ** len(fixed) * (10 ** len(period) - 1)
        numerator = int(whole) * denominator + int(fixed + period) - int(fixed or "0")
        return f"\\frac{{{numerator}}}{{{denominator}}}"

    return _REPEATING.sub(fraction, text)


def degrees_to_radians(part: str) -> str:
    """A degree sign inside an expression or a function's argument is a value: ``\\sin(90^\\circ - x)`` ->
    ``\\sin(\\frac{90\\pi}{180} - x)`` (math-verify drops the sign, which turns degrees into radians). A number
    that is the whole value (``90^\\circ``, ``x = 90^\\circ``) keeps its sign, compared as a unit (90 equals it)."""
    if not _DEGREE_NUMBER.search(part) or _BARE_DEGREES.fullmatch(re.split(r"(?<![<>!\\])=", part)[-1]):
        return part
    return _DEGREE_NUMBER.sub(lambda m: f"\\left(\\frac{{{m.group(1)}\\pi}}{{180}}\\right)", part)


def mixed_number(part: str) -> str:
    """``1 1/2`` -> ``\\frac{3}{2}`` (a whole number, a space, then a proper fraction); anything else unchanged."""
    match = _MIXED_NUMBER.fullmatch(part.strip())
    if match is None or int(match.group(3)) >= int(match.group(4)):
        return part
    sign, whole, top, bottom = match.groups()
    return f"{sign}\\frac{{{int(whole) * int(bottom) + int(top)}}}{{{bottom}}}"


def printed_decimal(part: str) -> Decimal | None:
    """The exact value of a decimal printed with 6 or more significant digits (``2.314814814815 \\times 10^{-3}``):
    such a gold is rounded, equal to an exact answer that rounds to it. A short decimal (``0.33``) is exact: None."""
    match = _LONG_DECIMAL.fullmatch(_SPACING.sub("", part))
    if match is None or len((match.group(2) + match.group(3)).lstrip("0")) < 6:
        return None
    return Decimal(f"{match.group(1)}{match.group(2) or 0}.{match.group(3)}e{match.group(4) or match.group(5) or 0}")


def time_of_day(part: str) -> tuple[int, int, int] | None:
    """(hours, minutes, seconds) of a time written ``20:34``, ``20:34:00`` or ``8:34 \\text{P.M.}``, else None."""
    match = _TIME.fullmatch(_SPACING.sub(" ", unwrap_text(part)).strip())
    if match is None:
        return None
    hours, minutes, seconds = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if match.group(4):
        if not 1 <= hours <= 12:
            return None
        hours = hours % 12 + (12 if match.group(4).lower() == "p" else 0)
    return (hours, minutes, seconds) if hours < 24 and minutes < 60 and seconds < 60 else None


def named_tuples(content: str) -> list[str] | None:
    """``p=5,q=2;p=7,q=2`` (solutions given as groups of named values) -> ``["(5,2)", "(7,2)"]``, else None."""
    groups = [split_top_level(group) for group in content.split(";")] if ";" in content else []
    if len(groups) < 2 or any(len(group) < 2 for group in groups):
        return None
    names, values = [], []
    for group in groups:
        matches = [_ASSIGNMENT.match(item) for item in group]
        if not all(matches):
            return None
        pairs = sorted((match.group(1), item[match.end() :].strip()) for item, match in zip(group, matches))
        names.append([name for name, _ in pairs])  # by name: "b=1,a=2" is the tuple (a, b) = (2, 1)
        values.append("(" + ", ".join(value for _, value in pairs) + ")")
    return values if all(group == names[0] for group in names) and len(set(names[0])) == len(names[0]) else None


def split_parts(content: str, gold: bool = False) -> list[str]:
    """The parts of one answer (the content of one box, or a bare gold): a comma/and/or list, a written-out set,
    ``\\pm``; each part keeps its brackets (a tuple, an interval or a matrix is one part). A gold's percent
    sign is dropped (``10\\%`` accepts 10 and 10%, not 0.1); an answer's is kept (``50\\%`` equals 1/2)."""
    content = _PERCENT.sub("" if gold else "\\%", content)
    content = strip_delimiters(repeating_decimals(join_thousands(content)))
    content = _MEMBER_PREFIX.sub("", content) if "\\in" in content else content  # x \in (2, 12): the set
    if ";" in content and (named := named_tuples(content)) is not None:
        return named
    if _EMPTY_SET.fullmatch(content):
        return ["\\emptyset"]
    builder = _SET_BUILDER.fullmatch(content)
    if builder and builder.group(1).strip():  # {x | -1 < x < 3} -> -1 < x < 3, compared with intervals
        content = builder.group(1).strip()
    inner = _outer_set(content)
    pieces = split_top_level(inner if inner is not None else content)
    parts: list[str] = []
    for piece in pieces:
        piece = strip_delimiters(_CURRENCY_LABEL.sub("", piece) if "\\$" in piece else piece)
        piece = re.sub(r"(?<!\\)\$", "", piece) if "$" in piece else piece  # "$125$ miles"
        piece = degrees_to_radians(piece) if "circ" in piece or "deg" in piece or "°" in piece else piece
        piece = mixed_number(piece) if " " in piece and "/" in piece else piece
        if piece:
            parts.extend(dict.fromkeys(expand_plus_minus(piece)) if "p" in piece else (piece,))
    return parts  # a multiset: a part written twice is required twice


def gold_parts(gold: str, ordered_lists: bool = False) -> tuple[tuple[str, ...], bool] | None:
    """(parts, ordered) of a gold answer, or None when it has no part or is broken LaTeX (unbalanced braces).
    Every ``\\boxed{}`` of the gold is a part (all are required); without a box the whole gold is one answer.
    The parts are a multiset (``1, 1, 2`` needs two 1s). ``ordered`` is True when ``ordered_lists`` is or when the
    parts are assignments to different variables (``a = 2, b = 3``): then bare values are taken in order."""
    if not balanced_braces(gold):
        return None
    boxes = _boxes(gold)
    contents = list(dict.fromkeys(box for box in boxes if box.strip())) if boxes else [gold]  # a box twice: restated
    if any(len(content) > MAX_ANSWER_CHARS for content in contents):
        return None
    parts = tuple(part for content in contents for part in split_parts(content, gold=True))
    if not parts:
        return None
    names = [_ASSIGNMENT.match(part) for part in parts]
    named = len(parts) > 1 and all(names) and len({name.group(1) for name in names}) == len(parts)
    return parts, len(parts) > 1 and (ordered_lists or named)


def balanced_braces(text: str) -> bool:
    """True when every unescaped ``{`` of ``text`` is closed, in order (``\\frac{`` is not an answer)."""
    braces = "".join(_BRACE.findall(text))
    while "{}" in braces:  # removing innermost pairs leaves nothing exactly when every brace is closed in order
        braces = braces.replace("{}", "")
    return not braces


def answer_parts(region: str) -> tuple[str, ...] | None:
    """The parts of a completion's answer: every ``\\boxed{}`` in its answer region (several boxes are several
    parts), or None when it has no non-empty box."""
    boxes = _boxes(region)
    if any(len(box) > MAX_ANSWER_CHARS for box in boxes):
        return None  # not an answer (and the string work stays cheap in the trainer's process)
    parts = tuple(part for content in boxes for part in split_parts(content))
    return parts or None


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the content of every brace-balanced ``\\boxed{...}``/``\\fbox{...}`` in ``text``, by start,
    nested boxes included. One pass over the braces: linear even with many unclosed boxes."""
    openings = {match.end() - 1 for match in _BOXED.finditer(text)}
    stack, spans = [], []
    for brace in _BRACE.finditer(text):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            start = stack.pop()
            if start in openings:
                spans.append((start + 1, brace.start()))
    return sorted(spans)


def _boxes(text: str) -> list[str]:
    """Contents of the outermost boxes of ``text``, in order."""
    contents, end = [], -1
    for start, close in boxed_spans(text):
        if start > end:
            contents.append(text[start:close])
            end = close
    return contents


def _closing_brace(text: str, start: int) -> int | None:
    depth = 1
    for pos in range(start, len(text)):
        if text[pos] in "{}" and text[pos - 1] != "\\":
            depth += 1 if text[pos] == "{" else -1
            if depth == 0:
                return pos
    return None


def unwrap_text(text: str) -> str:
    """``text`` with every ``\\text{...}``-like command replaced by its content."""
    while True:
        match = _TEXT_COMMAND.search(text)
        if match is None:
            return text
        close = _closing_brace(text, match.end())
        if close is None:
            return text
        text = text[: match.start()] + text[match.end() : close] + text[close + 1 :]


def text_key(part: str) -> str:
    """The normalised string used for exact matching: text commands unwrapped, spacing commands, ``\\left``/
    ``\\right``, whitespace (not between digits) and a final period removed, ``\\dfrac`` read as ``\\frac``,
    lower case outside command names (``\\Gamma`` stays)."""
    key = unwrap_text(part).replace("{,}", ",").replace("{:}", ":")
    key = re.sub(r"\\[dt]frac", r"\\frac", _ESCAPED.sub(lambda m: m.group(0)[1], key))
    key = _SPACING.sub("", re.sub(r"(?<=\d)\s+(?=\d)", "\u2423", key)).rstrip(".")
    return re.sub(r"(\\[A-Za-z]+)|[A-Z]+", lambda m: m.group(1) or m.group(0).lower(), key)


def is_word_answer(part: str) -> bool:
    """True for an answer made of words (``\\text{Monday}``, ``odd``, ``all real numbers``), which is compared
    as a string: letters only, and a word of 3+ letters, a capitalised word or a ``\\text{}`` of 2+ letters
    (``ab`` and ``AB`` stay products)."""
    unwrapped = unwrap_text(part).strip().rstrip(".")
    if not unwrapped or not re.fullmatch(r"[A-Za-z][A-Za-z' \-]*", unwrapped):
        return False
    longest = max(len(word) for word in re.findall(r"[A-Za-z]+", unwrapped))
    capitalised = re.fullmatch(r"[A-Z][a-z]+", unwrapped) is not None  # "No", "On"; "AB" and "ab" are products
    return longest >= 3 or (longest >= 2 and (capitalised or unwrapped != part.strip().rstrip(".")))


def looks_like_an_answer(part: str) -> bool:
    """False for golds that are not answers at all ("See the proof above.", a sentence): no proof words, at most
    six words outside LaTeX commands, at most 200 characters. (Such text would parse as a product of letters.)"""
    words = re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", unwrap_text(part))
    return len(words) <= 6 and len(part) <= 200 and not _NOT_AN_ANSWER.search(unwrap_text(part).lower())


def option_letter(part: str, strict: bool) -> str | None:
    """The option letter of a multiple-choice answer: ``(C)``, ``\\text{(C)}``, ``C`` (upper case only when
    ``strict``, i.e. for the gold, where a bare lower-case letter is a variable; an answer may also give the
    option's text after the letter: ``(C) 12``), or None."""
    key = _SPACING.sub("", unwrap_text(part)).rstrip(".")
    if strict and len(key) == 1 and not key.isupper():
        return None
    match = _OPTION.match(key.lower())
    if match is None and not strict and not re.search(r"\([A-Ea-e]\)|\b(?:or|and)\b", key[3:]):
        match = _OPTION_PREFIX.match(key.lower())  # "(C) 12", but not "(C) or (D)"
    return next(group for group in match.groups() if group) if match else None


def split_unit(part: str) -> tuple[str, str | None]:
    """(value, unit) of a number followed by a unit (``5\\text{ cm}``, ``5 m``, ``12\\text{ cm}^2``); the unit is
    normalised (``centimeters`` -> ``cm``), None when there is none. Only a plain number may carry a unit, and
    never a qualifier (``2\\text{ or more}``, ``3\\text{ if } n`` keep their text). This replaces math-verify's
    unit stripping, which also reads ``3t``, ``2d`` and ``2\\text{ or more}`` as plain numbers."""
    match = _UNIT_TAIL.search(part)
    if match is None:
        return part, None
    head = part[: match.start()].rstrip()
    if re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", head)) or not re.search(r"\d", head):
        return part, None
    wrapped, spaced, glued, power = match.groups()
    words = re.findall(r"[A-Za-z]+", (wrapped or spaced or glued).lower())
    if len(words) > 3 or any(word in _QUALIFIERS for word in words):
        return part, None
    word = "".join(words)
    function = re.match(r"(?:arc)?(?:sin|cos|tan|sec|csc|cot|log|ln|exp|sqrt)", word)  # 2sinx is not a unit
    short = len(word) < 3 or (glued and (len(word) < 4 or function or not re.search("[aeiouy]", word)))
    if short and word not in _SHORT_UNITS:  # 3t, 2xy, 5abc stay products; 5cm, 10weeks are units
        return part, None
    stem = word[:-2] if word.endswith("ches") else word[:-1] if word.endswith("s") and len(word) > 3 else word
    return head, _UNIT_ALIASES.get(stem, stem) + re.sub(r"[\s{}^]", "", power)


def plain_fraction(part: str) -> Fraction | None:
    """The value of a plain integer or integer fraction (``-12``, ``073``, ``\\frac{3}{4}``, ``6/8``), else None.

    A fast path, not a parser: math-verify's LaTeX parse costs milliseconds, and two such values have one
    verdict, exact equality, which is what math-verify gives them too. Anything else goes to math-verify."""
    match = _PLAIN_FRACTION.fullmatch(part.strip())
    if match is None:
        return None
    sign, integer, numerator, denominator, slash_numerator, slash_denominator = match.groups()
    top, bottom = int(integer or numerator or slash_numerator), int(denominator or slash_denominator or 1)
    if bottom == 0:
        return None
    value = Fraction(top, bottom)
    return -value if sign == "-" else value


def fraction_verdict(gold: tuple[str, ...], answer: tuple[str, ...], ordered: bool = False) -> bool | None:
    """The verdict when every gold and answer part is a plain integer or integer fraction (the same multiset of
    values, or the same sequence when ``ordered``; when the answer has more parts than the gold, a value it
    writes twice counts once, unless ordered), else None (the workers decide)."""
    gold_values = [plain_fraction(part) for part in gold]
    answer_values = [plain_fraction(part) for part in answer]
    if None in gold_values or None in answer_values:
        return None
    if len(answer_values) > len(gold_values) and not ordered:  # a sequence written with an extra entry is another
        answer_values = list(dict.fromkeys(answer_values))
    return answer_values == gold_values if ordered else sorted(answer_values) == sorted(gold_values)


def is_assignment(part: str) -> bool:
    return _ASSIGNMENT.match(part) is not None
