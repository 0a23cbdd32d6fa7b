"""Redacting a secret from a text, in any form a provider's server could echo it in.

A hostile or careless OpenAI-compatible server answers with the key it was
sent: as written, in other capitals, reversed, hex-encoded, base64-encoded
(alone, or inside `Basic`/`Bearer ` at any alignment), URL-encoded, spaced out
("s k - p r o j ..."), split by zero-width or other invisible characters, or
cut into pieces. Nothing of it may be stored (`llm_calls`, rationales,
`annotations.extra`, `llm_runs.params`, the search index, exports) or printed.

How a text is searched. Each secret gives its *forms*: as written, reversed,
hex (of it and of it reversed), base64 (standard and URL-safe alphabets, each
at the three alignments it can have inside a longer encoded text), and
URL-encoded (every byte as `%XX`, or only what is not a letter or digit). The
text is read twice:

- as it stands, every character compared in lower case once what is drawn as
  nothing is taken out (format characters such as zero-width spaces, the
  characters `store.names` calls drawn as nothing, combining marks) and
  compatibility forms are read as what they stand for (full-width letters):
  any run of `PIECE` characters of a form is redacted (a key cut into pieces
  of 8 or more, an 11-character prefix, a slice of its base64);
- as its letters and digits only (every space, separator, punctuation mark and
  escape prefix such as `\\x`, `0x` or `&#x` taken out): any run of `SPREAD`
  letters and digits of a form (the whole form when it is shorter) is
  redacted, so a key spaced out, one character a line, or hex bytes written
  `\\x73\\x6b...` is found too. Only secrets of `SPREAD` letters and digits or
  more are searched so: a short one would meet ordinary words run together.

The span redacted runs from the first to the last character of the text the
match read, separators and invisible characters between them included, so
`[redacted]` takes the whole echo's place. A secret shorter than `PIECE` is
redacted only as written (in any capitals). Secrets chosen by a person (a
password in a base URL) are searched in runs of `WORD_SAFE_PIECE`, not
`PIECE`: eight letters of a password may be an ordinary word.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from store.names import drawn_as_nothing

REDACTED = "[redacted]"

PIECE = 8
"""A run of this many characters of a key's form, in the text as it stands, is
an echo of the key."""
WORD_SAFE_PIECE = 12
"""The same for a secret a person chose (a base URL's password): shorter runs
of it may be ordinary words."""
SPREAD = 16
"""A run of this many letters and digits of a key's form, read across
separators, spaces and invisible characters, is an echo of the key."""
SHORTEST = 4
"""Shorter secrets are not redacted at all (they would be ordinary text)."""


@dataclass(frozen=True)
class Secret:
    value: str
    piece: int = PIECE
    """Characters of a form that make an echo in the text as it stands."""


def forms(secret: str) -> list[str]:
    """The secret as a server may send it back, lower-cased (matching ignores case)."""
    raw = secret.encode()
    found = [secret, secret[::-1], raw.hex(), raw[::-1].hex(),
             "".join(f"%{b:02x}" for b in raw),
             "".join(c if c.isascii() and c.isalnum() else
                     "".join(f"%{b:02x}" for b in c.encode()) for c in secret)]
    for lead in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * lead + raw).decode()
            # The characters that depend only on the secret: not the first group
            # (mixed with what comes before it) nor the last (mixed with what follows).
            inner = encoded[4 if lead else 0:-4]
            if inner:
                found.append(inner)
            if not lead:
                found.append(encoded.rstrip("="))
    return list(dict.fromkeys(f.lower() for f in found if f))


def _skeleton(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


@dataclass(frozen=True)
class _Matcher:
    pieces: dict[int, frozenset[str]]
    """Length -> runs of a form, in the text as it stands."""
    spread: dict[int, frozenset[str]]
    """Length -> runs of a form's letters and digits, read across separators."""
    candidates: re.Pattern
    """Runs of the text that could hold a piece: characters of some form only."""
    shortest: int


_CACHE: dict[tuple[Secret, ...], _Matcher | None] = {}


def _matcher(secrets: tuple[Secret, ...]) -> _Matcher | None:
    if secrets in _CACHE:
        return _CACHE[secrets]
    pieces: dict[int, set[str]] = {}
    spread: dict[int, set[str]] = {}
    chars: set[str] = set()
    for secret in secrets:
        if len(secret.value) < PIECE:
            continue
        for form in forms(secret.value):
            n = secret.piece
            if len(form) >= n:
                chars.update(form)
                pieces.setdefault(n, set()).update(form[i:i + n] for i in range(len(form) - n + 1))
            bare = _skeleton(form)
            if len(_skeleton(secret.value.lower())) >= SPREAD and len(bare) >= PIECE:
                n = min(SPREAD, len(bare))
                spread.setdefault(n, set()).update(bare[i:i + n]
                                                   for i in range(len(bare) - n + 1))
    if not pieces and not spread:
        _CACHE[secrets] = None
        return None
    shortest = min(pieces) if pieces else PIECE
    pattern = re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + f"]{{{shortest},}}"
                         if chars else "(?!)")
    matcher = _Matcher({n: frozenset(w) for n, w in pieces.items()},
                       {n: frozenset(w) for n, w in spread.items()}, pattern, shortest)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[secrets] = matcher
    return matcher


_ESCAPES = re.compile(r"\\x|\\u00|%u00|&#x|0x(?=[0-9a-fA-F]{2})", re.IGNORECASE)
"""Byte escapes written before hex digits: taken out when letters and digits are read."""


def _views(text: str) -> tuple[str, list[int], str, list[int]]:
    """(the text as it stands, lower-cased, without what is drawn as nothing; the
    index in `text` of each of its characters; its letters and digits only, escape
    prefixes taken out; the index in `text` of each of those)."""
    escaped = set()
    for m in _ESCAPES.finditer(text):
        escaped.update(range(m.start(), m.end()))
    if text.isascii():
        lower = text.lower()
        plain, plain_at = lower, list(range(len(lower)))
        bare_at = [i for i, c in enumerate(lower) if c.isalnum() and i not in escaped]
        return plain, plain_at, "".join(lower[i] for i in bare_at), bare_at
    plain_chars: list[str] = []
    plain_at: list[int] = []
    bare_chars: list[str] = []
    bare_at: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKD", ch).lower():
            if drawn_as_nothing(c) or unicodedata.category(c) in ("Mn", "Me"):
                continue
            plain_chars.append(c)
            plain_at.append(i)
            if c.isalnum() and i not in escaped:
                bare_chars.append(c)
                bare_at.append(i)
    return "".join(plain_chars), plain_at, "".join(bare_chars), bare_at


def _spans(view: str, at: list[int], windows: dict[int, frozenset[str]],
           runs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    found = []
    for start, end in runs:
        for n, known in windows.items():
            for i in range(start, end - n + 1):
                if view[i:i + n] in known:
                    found.append((at[i], at[i + n - 1] + 1))
    return found


def redact_secrets(text: str | None, secrets: Iterable[str | Secret]) -> str | None:
    """`text` with every secret (at least `SHORTEST` characters) replaced by
    [redacted], in any of the forms the module lists."""
    if text is None:
        return None
    kept = tuple(s if isinstance(s, Secret) else Secret(s) for s in secrets
                 if (s.value if isinstance(s, Secret) else s)
                 and len(s.value if isinstance(s, Secret) else s) >= SHORTEST)
    if not kept or not text:
        return text
    for secret in kept:
        text = re.sub(re.escape(secret.value), REDACTED, text, flags=re.IGNORECASE)
    matcher = _matcher(kept)
    if matcher is None:
        return text
    plain, plain_at, bare, bare_at = _views(text)
    spans = _spans(plain, plain_at, matcher.pieces,
                   ((m.start(), m.end()) for m in matcher.candidates.finditer(plain)))
    if matcher.spread and len(bare) >= min(matcher.spread):
        spans += _spans(bare, bare_at, matcher.spread, [(0, len(bare))])
    if not spans:
        return text
    spans.sort()
    merged = [list(spans[0])]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, last = [], 0
    for start, end in merged:
        out.append(text[last:start])
        out.append(REDACTED)
        last = end
    out.append(text[last:])
    return "".join(out)
