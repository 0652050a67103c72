"""The agents of the decorator cases, round two (issue 25): agent code run under ``@trace``.

From ``bearer_base64_secret`` to ``held_independent_path_reads``. Each function is one case's
agent, doing real work and passing real values on; its labels and the reasoning behind them are
its entry in the table (``cases_*``).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from .builders import SECRETS, USERS, net, traced


def bearer_base64_secret() -> None:
    import base64

    trace = traced()

    @trace(name="get_secret")
    def get_secret(path: str) -> str:
        net(15)
        return base64.b64encode(SECRETS[int(path[-1])].encode()).decode()

    @trace(name="call_api")
    def call_api(endpoint: str, authorization: str) -> int:
        net(20)
        return len(authorization)

    @trace(name="sync_account")
    def sync(k: int) -> int:
        token = base64.b64decode(get_secret(f"kv/app/{k}")).decode()
        return call_api(f"/v1/sync/{k}", "Bearer " + token)

    for k in range(4):
        sync(k)


def id_in_url_path() -> None:
    trace = traced()

    @trace(name="find_order")
    def find_order(customer: str) -> dict[str, Any]:
        net(15)
        return {"id": 48213 + 17 * int(customer[-1]), "status": "open"}

    @trace(name="get_items")
    def get_items(url: str) -> list[str]:
        net(20)
        return [f"item-{url.count('/')}"]

    @trace(name="show_order")
    def show(customer: str) -> int:
        order = find_order(customer)
        return len(get_items(f"https://shop.example.com/orders/{order['id']}/items"))

    for c in USERS[:4]:
        show(c)


def proof_over_nonce() -> None:
    import hashlib

    trace = traced()
    nonces = iter(["n-8f3a21", "n-77c0e9", "n-1b9d44", "n-c2e7a0"])

    @trace(name="get_nonce")
    def get_nonce(client: str) -> str:
        net(12)
        return next(nonces)

    @trace(name="submit_proof")
    def submit_proof(client: str, proof: str) -> bool:
        net(18)
        return proof[0] in "0123456789abcdef"

    @trace(name="login")
    def login(client: str) -> bool:
        nonce = get_nonce(client)
        return submit_proof(client, hashlib.sha256((nonce + "k3y").encode()).hexdigest())

    for c in ["cli-1", "cli-2", "cli-3", "cli-4"]:
        login(c)


def json_string_output_field() -> None:
    trace = traced()

    @trace(name="run_execution")
    def run_execution(state_machine: str, payload: str) -> dict[str, str]:
        net(25)
        return {
            "status": "SUCCEEDED",
            "output": json.dumps({"report_id": f"rpt-{len(payload)}{payload[-1]}"}),
        }

    @trace(name="get_report")
    def get_report(report_id: str) -> str:
        net(15)
        return report_id.upper()

    @trace(name="make_report")
    def make(k: int) -> str:
        done = run_execution("monthly-report", f"region-{k}")
        return get_report(json.loads(done["output"])["report_id"])

    for k in range(4):
        make(k)


def switch_context_returns_nothing() -> None:

    trace = traced()
    state = os.path.join(tempfile.gettempdir(), "kubeconfig")

    @trace(name="switch_context")
    def switch_context(name: str) -> None:
        net(10)
        with open(state, "w") as f:
            f.write(name)

    @trace(name="list_pods")
    def list_pods(namespace: str) -> list[str]:
        net(15)
        with open(state) as f:
            return [f"{f.read()}/{namespace}/pod-1"]

    @trace(name="inspect_cluster")
    def inspect(k: int) -> int:
        switch_context(f"cluster-{k}")
        return len(list_pods("default"))

    for k in range(4):
        inspect(k)


def held_hex_token_header() -> None:
    trace = traced()

    @trace(name="get_token")
    def get_token(account: str) -> str:
        net(12)
        return f"tok_{account}_{len(account) * 7}".encode().hex()

    @trace(name="post_metrics")
    def post_metrics(series: str, auth: str) -> int:
        net(18)
        return len(series)

    @trace(name="push_metrics")
    def push(k: int) -> int:
        token = bytes.fromhex(get_token(f"sa-{k}")).decode()
        return post_metrics(f"cpu.host{k}", "Token " + token)

    for k in range(4):
        push(k)


def held_url_encoded_title() -> None:
    from urllib.parse import quote

    trace = traced()

    @trace(name="search_titles")
    def search_titles(query: str) -> dict[str, str]:
        net(15)
        return {"title": f"Q{len(query) % 4 + 1} report & plan {len(query)}"}

    @trace(name="fetch_doc")
    def fetch_doc(url: str) -> int:
        net(20)
        return len(url)

    @trace(name="open_doc")
    def open_doc(q: str) -> int:
        title = search_titles(q)["title"]
        return fetch_doc("https://docs.example.com/doc?title=" + quote(title))

    for q in ["quarterly numbers", "plans", "budget review", "hiring"]:
        open_doc(q)


def held_independent_path_reads() -> None:
    trace = traced()

    @trace(name="fetch_user")
    def fetch_user(url: str) -> dict[str, str]:
        net(20)
        return {"login": url.rsplit("/", 1)[-1], "plan": "pro"}

    @trace(name="fetch_repo")
    def fetch_repo(url: str) -> dict[str, int]:
        net(20)
        return {"stars": len(url), "forks": 3}

    @trace(name="load_home")
    def load(user: str, repo: str) -> int:
        u = fetch_user(f"https://api.example.com/users/{user}")
        r = fetch_repo(f"https://api.example.com/repos/{repo}")
        return len(u) + r["stars"]

    for k in range(4):
        load(USERS[k], f"r-{900 + 13 * k}")
