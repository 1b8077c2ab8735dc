// The API client: the key lives only in sessionStorage and travels only in the Authorization
// header (never in a URL). Errors come back as ApiError with the API's status and message. A write
// request (POST, PATCH, DELETE) takes the previous request's error off the page as it starts.
import { clearError } from "./messages.js";

const KEY = "livingrag.key";
const ROLE = "livingrag.role";
const TENANT = "livingrag.tenant";
const TENANT_NAME = "livingrag.tenantName";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  get role() { return sessionStorage.getItem(ROLE); },
  get tenant() { return sessionStorage.getItem(TENANT); },
  get tenantName() { return sessionStorage.getItem(TENANT_NAME); },
  signIn(key, role) {
    sessionStorage.setItem(KEY, key);
    sessionStorage.setItem(ROLE, role);
    sessionStorage.removeItem(TENANT);
    sessionStorage.removeItem(TENANT_NAME);
  },
  actFor(id, name) {
    sessionStorage.setItem(TENANT, String(id));
    sessionStorage.setItem(TENANT_NAME, name);
  },
  signOut() {
    for (const k of [KEY, ROLE, TENANT, TENANT_NAME]) sessionStorage.removeItem(k);
  },
  get ready() {
    return !!this.key && (this.role === "tenant" || (this.role === "operator" && !!this.tenant));
  },
};

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

/** The headers of a request: the key, the operator's tenant (unless ``asTenant`` is false: admin
 * routes), what is accepted, and JSON when a body is sent. */
export function requestHeaders({ key = session.key, asTenant = true, accept = "application/json", json = false } = {}) {
  const headers = { Accept: accept };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (asTenant && session.role === "operator" && session.tenant) headers["X-Livingrag-Tenant"] = session.tenant;
  if (json) headers["Content-Type"] = "application/json";
  return headers;
}

/** The ApiError of a failed response, from its JSON error body (``data``, read here when not
 * given), else its status line; a 401 for the signed-in key asks to sign in again. */
export async function responseError(res, data, key = session.key) {
  if (data === undefined) {
    try { data = await res.json(); } catch { data = null; }
  }
  const err = (data && data.error) || {};
  const e = new ApiError(res.status, err.code || "error", err.message || `${res.status} ${res.statusText}`);
  if (res.status === 401 && key === session.key) onUnauthorized(e);
  return e;
}

/** Call the API; ``asTenant`` false leaves out the operator's tenant header (admin routes). */
export async function api(method, path, body, { key = session.key, asTenant = true } = {}) {
  const headers = requestHeaders({ key, asTenant, json: body !== undefined });
  if (method !== "GET") clearError();
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (exc) {
    throw new ApiError(0, "network", `the server did not answer (${exc.message})`);
  }
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) throw await responseError(res, data, key);
  return data;
}

export const get = (p, o) => api("GET", p, undefined, o);
export const post = (p, b, o) => api("POST", p, b === undefined ? {} : b, o);
export const patch = (p, b) => api("PATCH", p, b);
export const del = (p) => api("DELETE", p);

/** A query string from an object (undefined, null and "" are left out). */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const t = u.toString();
  return t ? `?${t}` : "";
}
