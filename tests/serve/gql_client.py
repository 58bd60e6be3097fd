"""A director's client: Python's `gql` (PyPI) against `ipamctl serve`.

Fetches the schema by introspection, then claims, asks again, lists and releases, printing
one JSON line per step for tests/serve_clients.rs to check. Arguments: URL TOKEN.
"""
import json
import sys

from gql import Client, gql
from gql.transport.requests import RequestsHTTPTransport

url, token = sys.argv[1], sys.argv[2]
transport = RequestsHTTPTransport(
    url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30, retries=0
)
with Client(transport=transport, fetch_schema_from_transport=True) as session:
    schema = session.client.schema
    print(json.dumps({"step": "schema", "mutations": sorted(schema.mutation_type.fields)}))
    allocate = gql(
        "mutation($input: AllocateInput!) { allocate(input: $input) { owner addresses action } }"
    )
    one = {"input": {"namespace": "acme/prod", "pool": "vpc-main", "owner": "VirtualMachine/api-07/0"}}
    print(json.dumps({"step": "allocate", **session.execute(allocate, variable_values=one)}))
    print(json.dumps({"step": "again", **session.execute(allocate, variable_values=one)}))
    many = gql(
        "mutation($inputs: [AllocateInput!]!) { allocateMany(inputs: $inputs) "
        "{ index claim { owner addresses } error { code exit message } } }"
    )
    inputs = {"inputs": [
        {"pool": "public-zone-a", "owner": "FloatingIP/fip-11"},
        {"pool": "no-such-pool", "owner": "FloatingIP/fip-2"},
        {"pool": "public-zone-a", "owner": "FloatingIP/fip-13"},
    ]}
    print(json.dumps({"step": "many", **session.execute(many, variable_values=inputs)}))
    listed = gql("query($ns: String) { allocations(namespace: $ns) { address owner } pools(namespace: $ns) { name allocated } }")
    print(json.dumps({"step": "list", **session.execute(listed, variable_values={"ns": "acme/prod"})}))
    release = gql("mutation($input: ReleaseInput!) { release(input: $input) }")
    gone = {"input": {"namespace": "acme/prod", "pool": "vpc-main", "owner": "VirtualMachine/api-07/0"}}
    print(json.dumps({"step": "release", **session.execute(release, variable_values=gone)}))
