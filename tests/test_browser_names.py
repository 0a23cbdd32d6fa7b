"""Names, end to end: a display name holding a character a screen does not draw
as itself, or letters of two scripts, is never taken at sign-in through a real
OpenID Connect provider (oidc-provider-mock), whatever other names exist; an
e-mail with spaces around it is not the admin's.

The adversarial run signed in as `adjudi\\u200bcated` (a zero-width space
inside) before any rater `adjudicated` existed, and as `\\u202eakanaT ieM .rD`,
which the sidebar showed as "Dr. Mei Tanaka"."""

from __future__ import annotations

import pytest

from tests.test_browser_login import ADMIN_EMAIL, idp, rater, sign_in, site  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("display", ["adjudi\u200bcated", "\u202eakanaT ieM .rD",
                                     "Dr. M\u0435i Okonkwo", "Zoe\u2066 Zhang\u2069"])
def test_a_display_name_not_shown_as_it_is_is_never_taken(site, idp, display):  # noqa: F811
    sub = f"hidden-{display.encode('unicode_escape').decode()}"
    shown = sign_in(site, idp, sub, {"email": "someone@example.org", "email_verified": True,
                                     "name": display})
    name, role, kind, _ = rater(site[1], sub)
    assert name.startswith("Reviewer ") and role == "reviewer" and kind == "human"
    assert name in shown and display not in shown
    assert "Mei Tanaka" not in shown and "adjudicated" not in shown


def test_an_email_with_spaces_around_it_is_not_the_admins(site, idp):  # noqa: F811
    shown = sign_in(site, idp, "spaced-sub", {"email": f" {ADMIN_EMAIL} ",
                                              "email_verified": True, "name": "Spacey Admin"})
    assert "reviewer · signed in as spaced-sub" in shown and "Rounds and people" not in shown
    assert tuple(rater(site[1], "spaced-sub")) == ("Spacey Admin", "reviewer", "human", None)
