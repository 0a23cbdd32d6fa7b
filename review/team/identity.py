"""Who signed in (server mode): a person is their login provider's issuer and subject.

With OpenID Connect login (Streamlit's `st.login`), the ID token's claims say
who signed in. carelens keys each person on the pair (`iss`, `sub`): the
subject is the provider's own, never reassigned id of the person, and is
unique only together with its issuer. Nothing else is an identity:

- an e-mail is used (shown, matched against the configured admins) only when
  the provider says it is verified (`email_verified` true), and is compared
  exactly, nothing trimmed: `ADMIN@example.org` is not `admin@example.org`,
  nor is `" admin@example.org "` (an e-mail with spaces, controls or invisible
  characters in it is no address anyone has, and is not used at all);
- a `sub` that looks like an e-mail is just a subject;
- the display name (`name`) only names the rater, and never a name the system
  uses (`review.team.reviewers.reserved_name`), one no rater may have (format
  characters such as zero-width spaces and bidirectional overrides, mixed
  scripts: `store.names.name_problem`), nor one a screen would show like
  another rater's (capitals, spaces, look-alike characters:
  `review.team.reviewers.look_alike`): the person then gets a name of their
  own, and the sign-in's audit entry says why (`name_refused`). Another
  rater's very name gets a number: `Ada Admin (2)`.

Admins are named in configuration (`CARELENS_ADMINS`, or `admins` in the
`[carelens]` section of Streamlit's secrets): each entry is `ISSUER#SUBJECT`
(an issuer is a URL without a fragment, so the first `#` splits them) or a
verified e-mail. A person listed there is an admin from their first sign-in,
and no longer one from their first request after they are taken off it (the
role derives from the configuration, not from a flag kept in the database);
everyone else starts as a reviewer until an admin grants more. Nobody becomes
admin by signing in first.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from review.team.reviewers import (
    Reviewer,
    all_rater_names,
    look_alike,
    name_problem,
    reserved_name,
)
from store import Store, utcnow
from store.names import hidden_character

ADMINS_ENV = "CARELENS_ADMINS"

LAPSED_TO = "reviewer"
"""The role of an admin taken off the configuration's list, at their next request
(an admin may grant them another)."""


@dataclass(frozen=True)
class Identity:
    """A signed-in person, as the provider vouches for them."""

    issuer: str
    """The provider (OIDC `iss`)."""
    subject: str
    """The person's id at that provider (OIDC `sub`)."""
    email: str | None = None
    """Their e-mail, only when the provider says it is verified."""
    display_name: str | None = None
    """What the provider calls them (`name`): a name, never an identity."""

    @property
    def key(self) -> str:
        """`ISSUER#SUBJECT`, as `CARELENS_ADMINS` names a person."""
        return f"{self.issuer}#{self.subject}"

    @property
    def shown(self) -> str:
        """How the sidebar says who signed in: the verified e-mail, else the subject."""
        return self.email or self.subject


class NoIdentity(ValueError):
    """The login carries no issuer or no subject: nobody to sign in."""


def _verified(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def identity_from_claims(claims: Mapping[str, Any]) -> Identity:
    """The identity in an ID token's claims (`st.user`). Raises NoIdentity."""
    issuer = str(claims.get("iss") or "").strip()
    subject = str(claims.get("sub") or "")
    if not issuer or not subject.strip():
        raise NoIdentity("the login carries no issuer and subject (iss, sub): nobody to sign in")
    email = claims.get("email")
    email = str(email) if email and _verified(claims.get("email_verified")) else None
    if email is not None and not _an_address(email):
        email = None  # spaces, controls or invisible characters: no address anyone has
    name = claims.get("name")
    return Identity(issuer, subject, email or None, str(name) if name else None)


def _an_address(email: str) -> bool:
    """Whether a verified e-mail can be an address as written: no spaces (around it
    or in it), and nothing a screen would not show as it is (`hidden_character`)."""
    return not any(ch.isspace() for ch in email) and hidden_character(email) is None


def _email_key(email: str) -> str:
    """An e-mail as compared: exactly as written (nothing trimmed), except the
    domain's capitals."""
    mailbox, at, domain = email.rpartition("@")
    return f"{mailbox}{at}{domain.lower()}" if at else email


@dataclass(frozen=True)
class Admins:
    """The admins named in configuration."""

    keys: frozenset[str] = frozenset()
    """`ISSUER#SUBJECT` entries."""
    emails: frozenset[str] = frozenset()
    """Verified e-mails (`_email_key`)."""

    def __contains__(self, identity: Identity) -> bool:
        if identity.key in self.keys:
            return True
        return identity.email is not None and _email_key(identity.email) in self.emails

    def __bool__(self) -> bool:
        return bool(self.keys or self.emails)


def admins_from(entries: Iterable[str] | str | None) -> Admins:
    """Admins from configuration entries (a list, or one string of entries
    separated by commas, semicolons or whitespace)."""
    if entries is None:
        return Admins()
    if isinstance(entries, str):
        entries = entries.replace(",", " ").replace(";", " ").split()
    keys, emails = set(), set()
    for entry in entries:
        entry = str(entry).strip()
        if not entry:
            continue
        if "#" in entry:
            keys.add(entry)
        elif "@" in entry:
            emails.add(_email_key(entry))
        else:
            raise ValueError(f"{ADMINS_ENV}: {entry!r} is neither ISSUER#SUBJECT nor an e-mail")
    return Admins(frozenset(keys), frozenset(emails))


def configured_admins(secrets_entries: Iterable[str] | str | None = None) -> Admins:
    """The admins the environment (`CARELENS_ADMINS`) and the secrets name, together."""
    env = admins_from(os.environ.get(ADMINS_ENV))
    secret = admins_from(secrets_entries)
    return Admins(env.keys | secret.keys, env.emails | secret.emails)


_COLUMNS = "id, name, role, specialty, seniority"


def _reviewer(row) -> Reviewer:
    return Reviewer(row["id"], row["name"], row["role"] or "reviewer", row["specialty"],
                    row["seniority"])


def find_signed_in(store: Store, identity: Identity) -> Reviewer | None:
    """The person behind this identity, if they have signed in before."""
    row = store.query_one(
        f"SELECT {_COLUMNS} FROM raters WHERE login_issuer = ? AND login_subject = ?",
        (identity.issuer, identity.subject))
    return _reviewer(row) if row else None


def _name_for(conn, identity: Identity) -> tuple[str, str | None]:
    """A rater name for a new person, and why their display name was refused (None
    if it was not): their display name unless the system uses it or a screen would
    show it like another rater's name (capitals, spaces, invisible or look-alike
    characters: `review.team.reviewers.look_alike`), else one of their own."""
    base = " ".join((identity.display_name or "").split())
    refused = None
    if base:
        reason = reserved_name(None, base)
        twin = look_alike(base, all_rater_names(conn)) if reason is None else None
        if reason is None and twin is None:
            reason = name_problem(base)
        if reason is not None:
            refused = f"display name {base!r} refused: {reason}"
        elif twin is not None:
            refused = (f"display name {base!r} refused: a screen would show it like the rater"
                       f" {twin!r}'s")
    if not base or refused is not None:
        base = f"Reviewer {hashlib.sha256(identity.key.encode()).hexdigest()[:8]}"
    name, n = base, 1
    names = all_rater_names(conn)
    while name in names or look_alike(name, names) is not None:
        n += 1
        name = f"{base} ({n})"
    return name, refused


def reviewer_for_identity(store: Store, identity: Identity,
                          admins: Admins | None = None) -> Reviewer:
    """The reviewer behind a sign-in, made at their first one. On a server the
    admins are those `admins` names, at every sign-in and request: a person named
    there is an admin (made so now if they were not; audited); an admin no longer
    named there is an admin no more (`LAPSED_TO`; audited `admin_lapsed`), however
    they became one; anyone else new is a reviewer. An account made before identities were keyed
    on the issuer and subject (`raters.login`) is theirs when their verified
    e-mail is exactly its login."""
    admins = admins or Admins()
    wanted_admin = identity in admins
    known = find_signed_in(store, identity)
    if known is not None and (known.role == "admin") == wanted_admin \
            and not _email_changed(store, known, identity):
        return known
    with store.transaction() as conn:
        # Again, under the write lock: another tab may have signed them in meanwhile.
        row = conn.execute(
            f"SELECT {_COLUMNS}, login_email FROM raters WHERE login_issuer = ?"
            " AND login_subject = ?", (identity.issuer, identity.subject)).fetchone()
        if row is None and identity.email is not None:
            row = _link_earlier_account(store, conn, identity)
        if row is None:
            name, refused = _name_for(conn, identity)
            role = "admin" if wanted_admin else "reviewer"
            cur = conn.execute(
                "INSERT INTO raters (name, kind, role, login_issuer, login_subject, login_email,"
                " created_at) VALUES (?, 'human', ?, ?, ?, ?, ?)",
                (name, role, identity.issuer, identity.subject, identity.email, utcnow()))
            store.audit(name, "sign_in_first", "raters", cur.lastrowid, None,
                        {"name": name, "role": role, "issuer": identity.issuer,
                         "subject": identity.subject, "email": identity.email,
                         "display_name": identity.display_name, "name_refused": refused,
                         "admin_from": "configuration" if wanted_admin else None})
        else:
            if row["login_email"] != identity.email:
                conn.execute("UPDATE raters SET login_email = ? WHERE id = ?",
                             (identity.email, row["id"]))
            if wanted_admin and row["role"] != "admin":
                conn.execute("UPDATE raters SET role = 'admin' WHERE id = ?", (row["id"],))
                store.audit(row["name"], "admin_from_configuration", "raters", row["id"],
                            {"role": row["role"]}, {"role": "admin"})
            elif not wanted_admin and row["role"] == "admin":
                conn.execute(f"UPDATE raters SET role = '{LAPSED_TO}' WHERE id = ?",
                             (row["id"],))
                store.audit(row["name"], "admin_lapsed", "raters", row["id"],
                            {"role": "admin"},
                            {"role": LAPSED_TO, "why": f"no longer named in {ADMINS_ENV} nor"
                             " in the secrets' admins"})
    found = find_signed_in(store, identity)
    assert found is not None
    return found


def _email_changed(store: Store, known: Reviewer, identity: Identity) -> bool:
    return store.scalar("SELECT login_email IS NOT ? FROM raters WHERE id = ?",
                        (identity.email, known.id)) == 1


def _link_earlier_account(store: Store, conn, identity: Identity):
    """An account an earlier carelens made for this verified e-mail (its `login`,
    exactly), not yet anyone's: it becomes this identity's (audited)."""
    row = conn.execute(
        f"SELECT {_COLUMNS}, login_email FROM raters WHERE login = ? AND login_subject IS NULL"
        " AND kind = 'human'", (identity.email,)).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE raters SET login_issuer = ?, login_subject = ? WHERE id = ?",
                 (identity.issuer, identity.subject, row["id"]))
    store.audit(row["name"], "login_linked", "raters", row["id"], {"login": identity.email},
                {"issuer": identity.issuer, "subject": identity.subject})
    return row
