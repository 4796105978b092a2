"""Execute the README's Python blocks in order (one namespace, repo root as cwd) with a fake chat model, so the
README cannot drift from the code."""

import re
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import langchain_ragspine
import langchain_ragspine.config as config

REPO = Path(__file__).resolve().parents[2]


class ReadmeFakeChatModel(BaseChatModel):
    """Grades "yes" and answers with a cited sentence; records every prompt."""

    prompts: list = []

    @property
    def _llm_type(self) -> str:
        return "readme-fake"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        reply = "長い段落は文末で切ります [1]。" if "context" in text.lower() else "yes"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


def test_readme_python_blocks_run(monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text("utf-8"), re.S)
    assert len(blocks) >= 4  # ten lines + the three "Use it in LangChain" examples
    fake = ReadmeFakeChatModel(prompts=[])
    monkeypatch.setattr(config, "make_chat_model", lambda spec=None, **kw: fake)
    monkeypatch.setattr(langchain_ragspine, "make_chat_model", lambda spec=None, **kw: fake)
    monkeypatch.chdir(REPO)
    namespace: dict = {"__name__": "__readme__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "ja/tokenizers.md#" in out  # the ten-line example cites its source
    assert "長い段落は文末で切ります [1]。" in out  # the LCEL chain and the graph used the chat model
    assert fake.prompts and all("INTERNAL-ONLY-7f3a" not in p for p in fake.prompts)
    assert namespace["final"]["citations"], "the corrective graph answered with citations"
