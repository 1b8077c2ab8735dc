"""API keys over HTTP: ``/v1/keys`` for a tenant's own keys (a key with the ``admin`` scope) and
``/v1/tenants/{tenant_id}/keys`` for the operator (the admin key), the HTTP face of ``livingrag key``.

A key is returned in plain once, when it is created. Revocation takes effect on the key's next
request (keys are resolved on every request). Through ``/v1/keys`` a tenant cannot revoke its last
active admin key (409); the operator can.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path

from livingrag.api.deps import Services, admin, services, tenant_admin
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.schemas import KeyCreate, KeyCreated, KeyOut
from livingrag.services import keys, tenants
from livingrag.services.keys import KeyRecord

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "No such key (or tenant)."}}
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorResponse, "description": "The key name is taken, or the last admin key."}
}

router = APIRouter(prefix="/v1/keys", tags=["keys"], responses=COMMON_RESPONSES | _NOT_FOUND)
operator_router = APIRouter(
    prefix="/v1/tenants/{tenant_id}/keys",
    tags=["keys"],
    dependencies=[Depends(admin)],
    responses=COMMON_RESPONSES | _NOT_FOUND | {403: {"model": ErrorResponse, "description": "Not the admin key."}},
)


def key_out(rec: KeyRecord) -> KeyOut:
    """What a listing shows of a key (never the key or its hash)."""
    return KeyOut(
        id=rec.id,
        name=rec.name,
        prefix=rec.prefix,
        scopes=list(rec.scopes),
        state=rec.state(),
        created_at=rec.created_at,
        last_used_at=rec.last_used_at,
        expires_at=rec.expires_at,
        revoked_at=rec.revoked_at,
    )


def _created(rec: KeyRecord, key: str) -> KeyCreated:
    return KeyCreated(**key_out(rec).model_dump(), key=key)


# ---------------------------------------------------------------- the tenant's own keys


@router.post(
    "", status_code=201, response_model=KeyCreated, summary="Create a key (returned once)", responses=_CONFLICT
)
def create_key(body: KeyCreate, tid: int = Depends(tenant_admin), svc: Services = Depends(services)) -> KeyCreated:
    expires_at = keys.expiry(in_days=body.expires_in_days, at=body.expires_at)
    return _created(*keys.create_own_key(svc.db, tid, body.name, body.scopes, expires_at=expires_at))


@router.get("", response_model=list[KeyOut], summary="The tenant's keys, revoked and expired ones included")
def list_keys(tid: int = Depends(tenant_admin), svc: Services = Depends(services)) -> list[KeyOut]:
    return [key_out(r) for r in keys.list_own_keys(svc.db, tid)]


@router.post(
    "/{key_id}/revoke",
    response_model=KeyOut,
    summary="Revoke a key (from its next request on; the last admin key is refused)",
    responses=_CONFLICT,
)
def revoke_key(
    key_id: int = Path(..., ge=1), tid: int = Depends(tenant_admin), svc: Services = Depends(services)
) -> KeyOut:
    return key_out(keys.revoke_own_key(svc.db, tid, key_id))


# ---------------------------------------------------------------- the operator, for any tenant


@operator_router.post(
    "",
    status_code=201,
    response_model=KeyCreated,
    summary="Create a key for a tenant (returned once)",
    responses=_CONFLICT,
)
def operator_create_key(
    body: KeyCreate, tenant_id: int = Path(..., ge=1), svc: Services = Depends(services)
) -> KeyCreated:
    _, rec, key = tenants.create_key(
        svc.db, tenant_id, body.name, body.scopes, expires_in_days=body.expires_in_days, expires_at=body.expires_at
    )
    return _created(rec, key)


@operator_router.get("", response_model=list[KeyOut], summary="A tenant's keys")
def operator_list_keys(tenant_id: int = Path(..., ge=1), svc: Services = Depends(services)) -> list[KeyOut]:
    return [key_out(r) for r in tenants.list_keys(svc.db, tenant_id)]


@operator_router.post("/{key_id}/revoke", response_model=KeyOut, summary="Revoke a tenant's key")
def operator_revoke_key(
    tenant_id: int = Path(..., ge=1), key_id: int = Path(..., ge=1), svc: Services = Depends(services)
) -> KeyOut:
    return key_out(tenants.revoke_key(svc.db, tenant_id, key_id).key)
