"""The WebShop paper's rule baseline (Yao et al., 2022, section 5): search, first result, buy.

"Rule" in the paper's results table searches the instruction text, clicks the first search
result and buys it with its default options (no option is clicked). On a results page without
any product it goes back to search, which repeats the search until the step limit.
"""

from __future__ import annotations

from typing import Any

from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.envs.webshop.env import WebShopEnv, search_query
from agentbench_rl.envs.webshop.pages import BACK_TO_SEARCH, BUY_NOW


class RuleAgent:
    """``rule``: search the instruction, click the first result, buy (WebShop only).

    Example:
        >>> agent = RuleAgent()
        >>> agent.name
        'rule'
    """

    name = "rule"

    def __init__(self) -> None:
        self._env: WebShopEnv | None = None

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Bind to the WebShop env whose pages the rule reads."""
        shop = getattr(env, "unwrapped", env)
        if not isinstance(shop, WebShopEnv):
            raise ValueError(
                f"agent 'rule' is WebShop's rule baseline; env '{env.env_name}' has no such rule"
            )
        self._env = shop

    def act(self, observation: Any, info: StepInfo) -> str:
        """The rule's next action on the env's current page."""
        if self._env is None:
            raise RuntimeError("RuleAgent.act called before begin_episode")
        page = self._env.page
        if page.has_search_bar:
            return f"search[{search_query(self._env.goal.instruction_text)}]"
        if BUY_NOW in page.clickables:
            return f"click[{BUY_NOW}]"
        products = [name for name, what in page.clickables.items() if what.kind == "product"]
        return f"click[{products[0] if products else BACK_TO_SEARCH}]"
