"""What a rater's name may hold: only characters a screen shows as they are.

A name is what every screen, export and comparison shows ("carebench-gold vs
adjudicated"). A character that is not drawn (a zero-width space, a soft
hyphen, a joiner), one that moves the others (a right-to-left override:
`\\u202eakanaT ieM .rD` is shown as "Dr. Mei Tanaka"), a control character,
or letters of two scripts drawn alike (a Cyrillic `а` among Latin ones) make
a name read as another. So a new rater's name is refused, always, not only
when another rater's name would collide with it, when it holds:

- a format character (Unicode category Cf: zero-width spaces and joiners,
  bidirectional marks, embeddings, overrides and isolates, the soft hyphen,
  invisible operators, tags, ...), a control, surrogate, private-use or
  unassigned code point, a line or paragraph separator, a space other than
  the ordinary space (no-break, em, ideographic spaces: they look like one),
  or another character drawn as nothing (fillers, variation selectors, the
  combining grapheme joiner, the blank braille pattern);
- letters of more than one script, other than the mixes a name written in
  Japanese, Chinese or Korean has beside Latin letters (Unicode's "highly
  restrictive" profile, UTS #39 section 5.2): Latin with Han, Hiragana and
  Katakana; Latin with Han and Bopomofo; Latin with Han and Hangul. Digits,
  punctuation and combining accents belong to no script. Compatibility forms
  are read as what they stand for first (full-width Latin is Latin).

This is the one place the rule lives: `store.writer.RecordWriter.rater` (every
rater an import or an LLM run creates), `review.team.reviewers.ensure_reviewer`
(a name added in the sidebar) and `review.team.identity` (a display name at
sign-in, which is replaced by a name of the person's own) all ask it. Names a
screen would show like another rater's (capitals, spaces, look-alike letters)
are the other half of the rule, in `review.team.reviewers.look_alike`.
"""

from __future__ import annotations

import unicodedata

_REFUSED_CATEGORIES = {
    "Cf": "a format character (drawn as nothing, or reordering what follows)",
    "Cc": "a control character",
    "Cs": "a surrogate code point",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}

_DRAWN_AS_NOTHING = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0]
    + list(range(0x180B, 0x1810)) + list(range(0xFE00, 0xFE10))
    + list(range(0xE0100, 0xE01F0)))
"""Default-ignorable code points (and the blank braille pattern) that are not
of category Cf: fillers, variation selectors, the combining grapheme joiner."""

_CJK_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
"""Scripts a single name may mix (UTS #39, highly restrictive)."""

_SCRIPT_WORDS = {"CJK": "HAN", "IDEOGRAPHIC": "HAN", "KANGXI": "HAN"}
_NO_SCRIPT = {"MODIFIER", "KATAKANA-HIRAGANA", "SCRIPT", "DOUBLE-STRUCK", "BLACK-LETTER"}


def drawn_as_nothing(ch: str) -> bool:
    """Whether a character is drawn as nothing: a format character (zero-width
    spaces and joiners, bidirectional controls, the soft hyphen, tags, ...) or
    one of the default-ignorable characters of other categories."""
    return unicodedata.category(ch) == "Cf" or ord(ch) in _DRAWN_AS_NOTHING


def _script(ch: str) -> str | None:
    """The script a letter is written in (the first word of its Unicode name,
    CJK ideographs as HAN); None for what belongs to no script (digits,
    punctuation, symbols, marks, modifier letters)."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    word = unicodedata.name(ch, "").split(" ", 1)[0]
    if not word or word in _NO_SCRIPT:
        return None
    return _SCRIPT_WORDS.get(word, word)


def _code(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def scripts(name: str) -> list[str]:
    """The scripts of a name's letters, in order of first use (compatibility
    forms read as what they stand for)."""
    found: list[str] = []
    for ch in unicodedata.normalize("NFKC", name):
        script = _script(ch)
        if script is not None and script not in found:
            found.append(script)
    return found


def hidden_character(text: str) -> str | None:
    """Why `text` would not be shown as it is: the first character a screen does
    not draw as itself (the first list of the module), named by its code point;
    None when there is none."""
    for ch in text:
        category = unicodedata.category(ch)
        what = _REFUSED_CATEGORIES.get(category)
        if what is None and category == "Zs" and ch != " ":
            what = "a space other than the ordinary space"
        if what is None and ord(ch) in _DRAWN_AS_NOTHING:
            what = "a character drawn as nothing"
        if what is not None:
            label = unicodedata.name(ch, "").lower()
            return (f"it holds {what}, {_code(ch)}" + (f" ({label})" if label else "")
                    + ": a screen would not show it as it is")
    return None


def name_problem(name: str) -> str | None:
    """Why no rater may be called `name` (see the module); None when a rater may.
    The reason is one line and names the character by its code point."""
    hidden = hidden_character(name)
    if hidden is not None:
        return f"the name {hidden.removeprefix('it ')}"
    found = scripts(name)
    if len(found) > 1 and not any(set(found) <= mix for mix in _CJK_MIXES):
        words = [s.title() for s in found]
        return (f"the name mixes {', '.join(words[:-1])} and {words[-1]} letters, which a"
                " screen can draw alike: write it in one script")
    return None
