"""Who may see what: operators (staff) see every tenant; a tenant member sees its own tenant only."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from scheduler.models import Tenant


def tenant_of(user) -> Tenant | None:
    member = getattr(user, "tenant_member", None)
    return member.tenant if member is not None else None


class IsOperatorOrTenant(BasePermission):
    message = "this account is neither an operator nor a member of a tenant"

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and (user.is_staff or tenant_of(user) is not None))


class IsOperator(BasePermission):
    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_staff)
