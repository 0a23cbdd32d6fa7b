"""A permit to act, for the acting functions below `review` (the LLM runs).

Who may do what is decided in one place, `review.team.access.MATRIX`, and each
function that acts checks it itself. `labels/` cannot ask `review/` (arrows
point down, and `review` reads `labels`), so the functions there that act for a
person (`labels.llm.run_plan`, `collect_batch`, `abandon_batch`: runs paid with
the server's keys) take a `Permit`: issued by `review.team.access.permit` only
after the matrix allowed that person that action, naming the action, the person
and the session they act in. The function refuses a permit for another action
(`Permit.require`), and writes through stores acting in the permit's session
(`store.sessions`), so a run started in a session that has since ended writes
nothing more. No permit (None) is the operator at the command line, who may run
every command (`review.team.access`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class NotPermitted(PermissionError):
    """A permit for another action, or one not issued by the role matrix."""


_ISSUED = object()
"""What only `issue` (called by `review.team.access.permit`) puts in a permit."""


@dataclass(frozen=True)
class Permit:
    action: str
    """The action of `review.team.access.MATRIX` the person was allowed."""
    actor: str | None
    """Their name, as the audit log names them (None: the operator)."""
    session: int | None = None
    """The sign-in they act in (server mode): the stores a run writes through act in it."""
    _by: object = field(default=None, repr=False, compare=False)

    def require(self, action: str) -> None:
        """Refuse (NotPermitted) unless this permit was issued for `action`."""
        if self._by is not _ISSUED:
            raise NotPermitted("this permit was not issued by carelens's role check")
        if self.action != action:
            raise NotPermitted(f"a permit to {self.action.replace('_', ' ')} is not one to"
                               f" {action.replace('_', ' ')}")


def issue(action: str, actor: str | None, session: int | None = None) -> Permit:
    """A permit; only `review.team.access.permit` calls this, once the matrix agreed."""
    return Permit(action, actor, session, _ISSUED)


def checked(permit: Permit | None, action: str) -> int | None:
    """For a function that acts: the session to write in, once `permit` is checked
    for `action` (None: the operator at the command line, in no session)."""
    if permit is None:
        return None
    permit.require(action)
    return permit.session
