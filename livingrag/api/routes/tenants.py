"""``/v1/tenants``: tenant management with the admin key."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Response

from livingrag.api.deps import Services, admin, services
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.schemas import TenantCreate, TenantCreated, TenantOut
from livingrag.services import tenants
from livingrag.services.keys import PREFIX_CHARS

router = APIRouter(
    prefix="/v1/tenants",
    tags=["tenants"],
    dependencies=[Depends(admin)],
    responses=COMMON_RESPONSES | {403: {"model": ErrorResponse, "description": "Not the admin key."}},
)


@router.post(
    "", status_code=201, response_model=TenantCreated, summary="Create a tenant (returns its default key once)"
)
def create_tenant(body: TenantCreate, svc: Services = Depends(services)) -> TenantCreated:
    rec, key = tenants.create_tenant(svc.db, body.name)
    return TenantCreated(**vars(rec), api_key=key, api_key_prefix=key[:PREFIX_CHARS])


@router.get("", response_model=list[TenantOut], summary="List tenants")
def list_tenants(svc: Services = Depends(services)) -> list[TenantOut]:
    return [TenantOut(**vars(r)) for r in tenants.list_tenants(svc.db)]


@router.delete("/{tenant_id}", status_code=204, summary="Delete a tenant and everything it owns")
def delete_tenant(tenant_id: int = Path(..., ge=1), svc: Services = Depends(services)) -> Response:
    tenants.delete_tenant(svc.db, tenant_id)
    return Response(status_code=204)
