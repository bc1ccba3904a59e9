"""Who is calling, and may they? Kubernetes decides both.

Authentication: the caller's bearer token goes to a TokenReview; the API server says who it is
(user, groups, uid, extra), the same for a person's OIDC token as for a service-account token.
The review names the service's audiences and the answer must carry one of them: a token issued
for this service (`kubectl create token NAME --audience phalanx-api`) is refused by the kube API
itself, so a token handed to the web page cannot be replayed against the cluster, and a token
for the cluster is refused here.
Authorisation: every action is a SubjectAccessReview for that identity (verb, resource,
subresource, namespace, then name if needed), so RBAC decides, never the service's own broad
rights; a denial is a 403 in the API server's words. Both answers are cached briefly, keyed by a
hash of the token and by the identity and action, so that reads served from the watch cache stay
fast.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from kubernetes import client as k8s

from phalanx.control.errors import ForbiddenError, UnauthenticatedError
from phalanx.models import GROUP, PLURAL

T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """An authenticated identity, as the API server's TokenReview reported it."""

    username: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    service_credentials: bool = False
    """Development mode: no caller; the service acts with its own rights (never reviewed)."""


@dataclass(frozen=True)
class Action:
    """What a request does, in RBAC's terms."""

    verb: str
    namespace: str | None = None
    name: str | None = None
    resource: str = PLURAL
    group: str = GROUP
    subresource: str | None = None

    def forbidden_message(self, caller: Caller, reason: str) -> str:
        """The API server's words for a denial, plus RBAC's reason when it gives one."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        target = f' "{self.name}"' if self.name else ""
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = (
            f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        )
        message = (
            f'{resource}{target} is forbidden: User "{caller.username}" cannot {self.verb} '
            f'resource "{what}" in API group "{self.group}"{where}'
        )
        return f"{message}: {reason}" if reason else message


@dataclass
class TtlCache(Generic[T]):
    """A small time-bounded memo (thread-safe): decisions are cheap to repeat, not to make."""

    seconds: float
    _entries: dict[str, tuple[float, T]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get_or(self, key: str, compute: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        value = compute()
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
            self._entries[key] = (now + self.seconds, value)
        return value


class Authorizer:
    """TokenReview and SubjectAccessReview with the service's client."""

    def __init__(
        self,
        api: k8s.ApiClient,
        authn_seconds: float,
        authz_seconds: float,
        audiences: Sequence[str] = (),
    ) -> None:
        self.audiences = tuple(audiences)
        """What a caller's token must be issued for (empty: whatever the API server accepts)."""
        self._authn = k8s.AuthenticationV1Api(api)
        self._authz = k8s.AuthorizationV1Api(api)
        self._identities: TtlCache[Caller | None] = TtlCache(authn_seconds)
        self._decisions: TtlCache[tuple[bool, str]] = TtlCache(authz_seconds)

    def authenticate(self, authorization: str | None) -> Caller:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError("a bearer token is required (Authorization: Bearer <token>)")
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        caller = self._identities.get_or(digest, lambda: self._review(token.strip()))
        if caller is None:
            wanted = (
                f" for the audience {' or '.join(repr(a) for a in self.audiences)} (kubectl "
                f"create token NAME --audience {self.audiences[0]})"
                if self.audiences
                else ""
            )
            raise UnauthenticatedError(
                f"the token was not accepted by the Kubernetes API server{wanted}"
            )
        return caller

    def authorize(self, caller: Caller, action: Action) -> None:
        """ForbiddenError unless RBAC allows it. An action on one named object is first asked
        without the name: a Role that allows it for every object in the namespace (the usual
        case) then answers for all of them from one cached review, so a page that reads many
        jobs does not cost a review per job. Roles limited by resourceNames still get a review
        of the name."""
        if caller.service_credentials:
            return
        if action.name is not None and self._decide(caller, replace(action, name=None))[0]:
            return
        allowed, reason = self._decide(caller, action)
        if not allowed:
            raise ForbiddenError(action.forbidden_message(caller, reason))

    def _decide(self, caller: Caller, action: Action) -> tuple[bool, str]:
        key = repr((caller, action))
        return self._decisions.get_or(key, lambda: self._access(caller, action))

    def _review(self, token: str) -> Caller | None:
        audiences = list(self.audiences) or None
        review = self._authn.create_token_review(
            k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=token, audiences=audiences))
        )
        status = review.status
        if not status or not status.authenticated or not status.user:
            return None
        if audiences and not set(status.audiences or ()) & set(audiences):
            # An authenticator that ignores audiences answers without them: not good enough
            # (TokenReview's contract: the client checks the audiences it gets back).
            return None
        user = status.user
        extra = tuple(sorted((k, tuple(v)) for k, v in (user.extra or {}).items()))
        return Caller(user.username or "", user.uid, tuple(user.groups or ()), extra)

    def _access(self, caller: Caller, action: Action) -> tuple[bool, str]:
        attributes = k8s.V1ResourceAttributes(
            verb=action.verb,
            group=action.group,
            resource=action.resource,
            subresource=action.subresource,
            namespace=action.namespace,
            name=action.name,
        )
        review = self._authz.create_subject_access_review(
            k8s.V1SubjectAccessReview(
                spec=k8s.V1SubjectAccessReviewSpec(
                    user=caller.username,
                    uid=caller.uid,
                    groups=list(caller.groups),
                    extra={k: list(v) for k, v in caller.extra} or None,
                    resource_attributes=attributes,
                )
            )
        )
        status = review.status
        return bool(status and status.allowed), (status.reason if status else "") or ""
