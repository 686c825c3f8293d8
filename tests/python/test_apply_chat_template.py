"""folio.apply_chat_template, the Python face of folio's Jinja engine, with
Hugging Face's signature: against jinja2 configured as transformers does
(the oracle of test_chat_templates.py) on the corpus, and on the real model
against `folio template --model` and folio serve's prompt."""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

folio = pytest.importorskip("folio")

import smollm2  # noqa: E402
from test_chat_templates import CORPUS, SPECS, make_case, oracle  # noqa: E402

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_renders_the_corpus_like_jinja2(name):
    source = (CORPUS / name).read_text()
    rng = random.Random(f"apply-{name}")
    for _ in range(8):
        case = make_case(rng, SPECS[name])
        data = json.loads(case.messages_json)
        if isinstance(data, list):
            data = {"messages": data}
        kwargs = {k: v for k, v in data.items() if k != "messages"}
        bos = kwargs.pop("bos_token", case.bos or "")
        eos = kwargs.pop("eos_token", case.eos or "")
        want = oracle(source, case.messages_json, case.add_generation_prompt, case.bos or "",
                      case.eos or "", case.epoch)
        try:
            got = folio.apply_chat_template(source, data["messages"], case.add_generation_prompt,
                                            bos_token=bos, eos_token=eos,
                                            strftime_now=case.epoch, **kwargs)
        except ValueError as e:
            assert want.raised is not None and str(e) == "chat template raised: " + want.raised, \
                (name, case.messages_json, e)
            continue
        assert want.raised is None, (name, case.messages_json, want.raised)
        assert got == want.text, (name, case.messages_json)


def test_a_model_path_or_an_llm_gives_what_folio_template_and_serve_give(tmp_path):
    model = smollm2.require()
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    cli = subprocess.run([FOLIO, "template", "--model", str(model), "--messages",
                          str(tmp_path / "m.json")], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    text = folio.apply_chat_template(str(model), messages)
    assert text == cli.stdout and "You are a helpful AI assistant named SmolLM" in text
    llm = folio.LLM(str(model), num_pages=16, max_num_seqs=1)
    ids = folio.apply_chat_template(llm, messages, tokenize=True)
    assert len(ids) == 37  # folio serve's prompt_tokens for this question (test_smollm2)
    assert llm.get_tokenizer().decode(ids, skip_special_tokens=False) == text
    with pytest.raises(ValueError, match="needs a model"):
        folio.apply_chat_template("{{ messages }}", messages, tokenize=True)
    with pytest.raises(TypeError):
        folio.apply_chat_template(3, messages)
