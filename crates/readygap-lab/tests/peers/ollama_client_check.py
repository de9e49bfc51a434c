"""Drive a lab runtime with the official Ollama Python client (ollama 0.6.3).

Usage: python3 ollama_client_check.py BASE_URL [MODEL]

Lists models, generates (not streamed and streamed), chats, reads residency (ps), shows the model,
checks the 404 of a missing model and unloads with keep_alive=0. Every response goes through
the client's pydantic models, so a missing or mistyped field fails here. Prints one
`CHECK name value` line per fact and `OK` at the end; exits 1 with a message on any failure.
"""

import asyncio
import datetime
import sys
import time

try:
    import ollama
except ImportError:  # the Rust test looks for this exit code
    print("ollama python client not installed", file=sys.stderr)
    sys.exit(3)


def check(name, value):
    print(f"CHECK {name} {value}", flush=True)


def main(base, model):
    client = ollama.Client(host=base, timeout=60)

    listed = client.list()
    names = [m.model for m in listed.models]
    check("list", ",".join(names))
    assert model in names, names
    entry = next(m for m in listed.models if m.model == model)
    assert isinstance(entry.modified_at, datetime.datetime), entry
    assert entry.size and entry.size > 0, entry
    assert entry.details.family == "llama", entry.details
    assert entry.details.quantization_level, entry.details

    reply = client.generate(model=model, prompt="Reply with exactly: READY", stream=False, keep_alive="10m")
    check("generate", reply.response)
    assert reply.done is True and reply.done_reason == "stop", reply
    assert reply.response.strip() == "READY", reply.response
    parts = reply.load_duration + reply.prompt_eval_duration + reply.eval_duration
    assert 0 < parts <= reply.total_duration, reply
    assert reply.prompt_eval_count > 0 and reply.eval_count > 0, reply
    check("load_duration_ns", reply.load_duration)

    ps = client.ps()
    resident = [m.model for m in ps.models]
    check("ps", ",".join(resident))
    assert model in resident, resident
    running = next(m for m in ps.models if m.model == model)
    assert isinstance(running.expires_at, datetime.datetime), running
    assert running.expires_at > datetime.datetime.now(datetime.timezone.utc), running
    assert running.size > entry.size, (running.size, entry.size)
    assert running.size_vram == 0 and running.context_length == 4096, running

    chunks = list(client.generate(model=model, prompt="Reply with exactly: READY", stream=True))
    check("stream_chunks", len(chunks))
    assert len(chunks) >= 2, chunks
    assert chunks[0].done is False and chunks[0].response, chunks[0]
    assert chunks[-1].done is True and chunks[-1].eval_count > 0, chunks[-1]
    assert "".join(c.response for c in chunks).strip() == "READY", chunks

    chat = client.chat(model=model, messages=[{"role": "user", "content": "Reply with exactly: READY"}], stream=False)
    check("chat", chat.message.content)
    assert chat.message.role == "assistant" and chat.message.content == "READY", chat
    assert chat.done is True and chat.eval_count > 0, chat
    chat_chunks = list(client.chat(model=model, messages=[{"role": "user", "content": "Reply with exactly: READY"}], stream=True))
    assert chat_chunks[-1].done is True, chat_chunks
    assert "".join(c.message.content or "" for c in chat_chunks) == "READY", chat_chunks

    shown = client.show(model)
    check("show_family", shown.details.family)
    assert shown.modelinfo and shown.modelinfo.get("general.architecture") == "llama", shown
    assert "completion" in shown.capabilities, shown

    try:
        client.generate(model="missing:1b", prompt="hi", stream=False)
        raise AssertionError("missing model answered")
    except ollama.ResponseError as e:
        check("missing_status", e.status_code)
        assert e.status_code == 404 and "not found" in e.error, (e.status_code, e.error)

    async def unload():
        aclient = ollama.AsyncClient(host=base, timeout=60)
        return await aclient.generate(model=model, prompt="", keep_alive=0)

    unloaded = asyncio.run(unload())
    check("unload_reason", unloaded.done_reason)
    assert unloaded.done_reason == "unload", unloaded
    # The reply comes before the unload, as in Ollama (server/routes.go answers after
    # sched.expireRunner; server/sched.go drops the runner from `loaded`, which ps lists,
    # once its process exited): ps lists the model until then. Poll, bounded.
    deadline = time.monotonic() + 10
    after = client.ps()
    while any(m.model == model for m in after.models) and time.monotonic() < deadline:
        time.sleep(0.02)
        after = client.ps()
    check("ps_after_unload", len(after.models))
    assert all(m.model != model for m in after.models), after
    print("OK", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "llama3.2:3b")
    except Exception as e:  # report, do not dump a traceback only
        print(f"FAILED {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
