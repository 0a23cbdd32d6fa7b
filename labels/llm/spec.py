"""Which model answers, and with which credentials.

A *model spec* names a provider and a model in one string:

    anthropic:claude-haiku-4-5          Anthropic Messages API
    openai:gpt-4.1-mini                  OpenAI Chat Completions API
    compatible:llama3.1:8b               any OpenAI-compatible server; its base URL
                                         comes from CARELENS_COMPATIBLE_BASE_URL or
                                         the `base_url` argument
    compatible:http://host:8000/v1#llama3.1:8b
                                         the same, with the base URL in the spec

The provider is everything before the first colon; for `compatible`, a part
before `#` that starts with http(s):// is the base URL. The machine rater is
named `provider:model@prompt_version` (the base URL is not part of the name).

Keys are read only from the environment, or from a mapping the app passes in
(Streamlit secrets): ANTHROPIC_API_KEY, OPENAI_API_KEY,
CARELENS_COMPATIBLE_API_KEY. Base URLs: ANTHROPIC_BASE_URL, OPENAI_BASE_URL,
CARELENS_COMPATIBLE_BASE_URL, or an explicit argument. A key is never stored,
logged or exported: `redact` removes known keys, in any form a server could
echo them in (`labels.llm.redaction`), from any text before it is written
or printed anywhere (and `user:password` of a base URL; the password alone only
when it is not too short to be told from ordinary words, `SHORT_PASSWORD`).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from labels.llm.redaction import (  # noqa: F401 - REDACTED read from here too
    REDACTED,
    WORD_SAFE_PIECE,
    Secret,
    redact_secrets,
)

PROVIDERS = ("anthropic", "openai", "compatible")

KEY_VARS = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "compatible": "CARELENS_COMPATIBLE_API_KEY",
}
BASE_URL_VARS = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "compatible": "CARELENS_COMPATIBLE_BASE_URL",
}
NO_KEY = "not-needed"
"""Sent to a compatible server when no key is configured (local servers ignore it)."""


class ModelSpecError(ValueError):
    """A model spec that cannot be read; the message shows the accepted forms."""


class MissingKeyError(RuntimeError):
    """No API key for a provider; the message names the environment variable."""


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    """anthropic | openai | compatible"""
    model: str
    base_url: str | None = None
    """Only from a `compatible:URL#model` spec; otherwise chosen when the client is made."""

    @property
    def name(self) -> str:
        """`provider:model`, the first half of a machine rater's name."""
        return f"{self.provider}:{self.model}"

    def __str__(self) -> str:
        return self.name


def parse_model_spec(spec: str | ModelSpec) -> ModelSpec:
    """Read `PROVIDER:MODEL` (see the module docstring)."""
    if isinstance(spec, ModelSpec):
        return spec
    text = str(spec).strip()
    provider, sep, rest = text.partition(":")
    provider = provider.strip().lower()
    rest = rest.strip()
    forms = ("anthropic:MODEL, openai:MODEL, compatible:MODEL or "
             "compatible:http://HOST:PORT/v1#MODEL")
    if not sep or not rest or provider not in PROVIDERS:
        raise ModelSpecError(f"cannot read model {text!r}; expected one of: {forms}")
    base_url = None
    if provider == "compatible" and re.match(r"https?://", rest):
        base_url, hash_, rest = rest.partition("#")
        if not hash_ or not rest.strip():
            raise ModelSpecError(
                f"cannot read model {text!r}: after the base URL give '#MODEL', "
                "e.g. compatible:http://localhost:8000/v1#llama3.1:8b")
        rest = rest.strip()
    if any(ch.isspace() for ch in rest) or "@" in rest:
        raise ModelSpecError(f"cannot read model {text!r}: a model name has no spaces and no '@'")
    return ModelSpec(provider, rest, base_url)


def resolve_key(provider: str, keys: Mapping[str, str] | None = None) -> str:
    """The API key for `provider`: from `keys` (by provider name or by the
    environment variable's name), else from the environment."""
    var = KEY_VARS[provider]
    for name in (provider, var):
        if keys and keys.get(name):
            return str(keys[name])
    value = os.environ.get(var)
    if value:
        return value
    if provider == "compatible":
        return NO_KEY
    raise MissingKeyError(
        f"no API key for {provider}: set {var} in the environment "
        "(or in .streamlit/secrets.toml for the app)")


def resolve_base_url(spec: ModelSpec, base_url: str | None = None) -> str | None:
    """The explicit base URL, the spec's, or the provider's environment variable."""
    url = base_url or spec.base_url or os.environ.get(BASE_URL_VARS[spec.provider]) or None
    if spec.provider == "compatible" and not url:
        raise ModelSpecError(
            "a compatible model needs a base URL: set CARELENS_COMPATIBLE_BASE_URL or use "
            "compatible:http://HOST:PORT/v1#MODEL")
    return url


def public_url(url: str | None) -> str | None:
    """A base URL fit to be recorded: user and password parts removed."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


SHORT_PASSWORD = 8
"""A URL password shorter than this (`admin:admin@host`) is not redacted on its
own, as a bare word, from what is stored: it is ordinary text ("administer")
and may be part of a label code. `user:password` and its Basic auth token
still are."""


def split_url_credentials(url: str | None) -> tuple[str | None, list[str]]:
    """(the URL without `user:password@`, the secrets it held): the password, as
    written and decoded (unless shorter than `SHORT_PASSWORD`), `user:password`,
    and the Basic auth token made of them, so that none of them is sent as Basic
    auth or stored if a server echoes it."""
    if not url:
        return url, []
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, []
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    userinfo = parts.netloc.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    secrets: list[str] = []
    for u, p in ((user, password), (unquote(user), unquote(password))):
        for secret in (p if len(p) >= SHORT_PASSWORD else "", f"{u}:{p}" if p else "",
                       base64.b64encode(f"{u}:{p}".encode()).decode() if u or p else ""):
            if secret and secret not in secrets:
                secrets.append(secret)
    return bare, secrets


def redact(text: str | None, secrets: Iterable[str | Secret]) -> str | None:
    """`text` with every secret replaced by [redacted], in any form a provider's
    server could echo it back in (`labels.llm.redaction.redact_secrets`: any
    capitals, reversed, hex, base64, URL-encoded, spaced out or split by
    invisible characters, and any piece of 8 or more of its characters). The
    placeholder key sent to keyless compatible servers is no secret."""
    return redact_secrets(text, [s for s in secrets if s != NO_KEY])


def url_secret(value: str) -> Secret:
    """A secret a person chose (a base URL's password, `user:password`): redacted in
    runs of `WORD_SAFE_PIECE`, not `PIECE`, of its characters."""
    return Secret(value, WORD_SAFE_PIECE)
