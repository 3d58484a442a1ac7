import time
import pytest

pytestmark = pytest.mark.django_db

def test_probe(site, api_a, submit):
    t = time.perf_counter()
    from scheduler.selectors import pool_capacity
    print({n: pool_capacity(p) for n, p in site.pools.items()})
    print(site.storage.hostname, [n.hostname for n in site.compute])
    j = submit(site.tenant_a, site.default, "x", gpus=8)
    r = api_a.get(f"/api/v1/jobs/{j.pk}/")
    print(r.status_code, r.json())
    r = api_a.get("/api/v1/pools/")
    print(r.json())
    print(time.perf_counter()-t)
