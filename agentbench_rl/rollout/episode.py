"""The episode driver: the one loop that plays episodes, for every client.

The harness (one episode at a time), group rollouts (G members on one task), batched training
rollouts (N x G members answered by one batched forward), behaviour cloning and the tiny
tokenizer's corpus all play their episodes through :class:`Lockstep`, so these rules live here
and nowhere else:

- **seeding**: an episode of task ``task_id`` under run seed ``seed`` resets its env with
  :func:`episode_seed` ``(seed, task_id)``; an agent is seeded with the same value, or, as member
  ``m`` of a group, with :func:`member_seed` ``(seed, task_id, m)``.
- **history**: after each step the episode's history gains ``HistoryStep(observation text the
  agent acted on, the env's canonical form of the action)``; prompts show its tail.
- **validity** (:func:`action_valid`): a step is valid when the action is a string, the answer
  kept its format (``generate`` mode: ``<think>..</think><action>..</action>``; other agents have
  no format) and the env accepted the action. A non-string action is invalid and counted apart
  (the env receives ``""``, so the step is taken and the state stays as it was). Training and
  evaluation count invalid actions by this one rule.
- **step records** (:func:`step_record`): the estimator row of a step (group, traj, t, reward,
  obs_key and state_key of the state acted in, action_key, valid), ``success`` added when the
  episode ends.

Two loops that are not ours drive an env one step per model call, so they cannot run on
:class:`Lockstep`: verl's agent loop (``integrations/verl/agent_loop.py``: the server generates)
and TRL's ``environment_factory`` (``integrations/trl.py``: TRL calls the env's tools). Both run
on this module's helpers, :func:`episode_seed`, :func:`action_valid`, :func:`history_step` and
:func:`step_fields`, so their seeds, validity, history and step records are these.

Example:
    >>> from agentbench_rl.envs import make
    >>> env = make("sokoban", split="test")
    >>> lock = Lockstep.of_envs([env], [EpisodeSlot("test-0000", episode_seed(0, "test-0000"))])
    >>> while lock.live:
    ...     rows = lock.step([None])  # an agent that answers None: invalid, counted
    >>> outcome = lock.episodes[0].outcome()
    >>> outcome.steps == outcome.invalid_actions == outcome.non_string_actions == env.max_steps
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentbench_rl.agents.base import Agent, BatchAgent, Capabilities
from agentbench_rl.core.batch import StepColumns, StepFields, StepRecord
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.prompting import HistoryStep, format_ok, observation_text
from agentbench_rl.rollout.workers import EnvPool, LocalEnvPool
from agentbench_rl.spec.records import EpisodeRow

#: Env seeds are drawn below 2**31 (what every Gymnasium backend accepts).
SEED_MODULUS = 2**31


def episode_seed(seed: int, task_id: str) -> int:
    """The env's (and a lone agent's) seed for ``task_id`` under run seed ``seed``.

    Example:
        >>> episode_seed(0, "test-0000") != episode_seed(1, "test-0000")
        True
    """
    return seed_from(seed, task_id) % SEED_MODULUS


def member_seed(seed: int, task_id: str, member: int) -> int:
    """The agent seed of group member ``member`` (members share the env seed, not the draws)."""
    return seed_from(seed, task_id, member)


def action_valid(action: object, info: StepInfo, format_kept: bool = True) -> bool:
    """The validity rule of a step (see the module docstring).

    Example:
        >>> action_valid("up", {"action_valid": True}), action_valid(None, {"action_valid": True})
        (True, False)
        >>> action_valid("up", {"action_valid": True}, format_kept=False)
        False
    """
    return isinstance(action, str) and format_kept and bool(info["action_valid"])


def env_action(action: object) -> str:
    """What the env receives: the action text, or ``""`` for a non-string action."""
    return action if isinstance(action, str) else ""


def format_kept(capabilities: Capabilities, action: object) -> bool:
    """Whether an answer kept its agent's answer format: agents whose ``answer_format`` is
    ``"generate"`` must write the papers' format; other agents have none to keep.

    Example:
        >>> class Model:
        ...     answer_format = "generate"
        >>> format_kept(Capabilities.of(Model()), "<action>up</action>")
        False
        >>> format_kept(Capabilities.of(object()), "up")
        True
    """
    if capabilities.answer_format != "generate":
        return True
    return isinstance(action, str) and format_ok(action)


def history_step(observation: Any, after: StepInfo) -> HistoryStep:
    """The history entry of one step: the text of the observation acted on, and the env's
    canonical form of the action (``after``: the info the step returned).

    Example:
        >>> history_step({"image": None, "text": "#P#"}, {"action_canonical": "up"})
        HistoryStep(observation='#P#', action='up')
    """
    return HistoryStep(observation_text(observation), after["action_canonical"])


def step_fields(
    t: int, reward: float, before: StepInfo, after: StepInfo, valid: bool
) -> StepFields:
    """What one step contributes to its estimator row, whoever plays it (this driver, verl's
    agent loop): its index, reward, keys (the observation it acted on and the one it led to:
    GraphGPO's graph edge) and validity (``before``/``after``: the env's info before and after
    the step).

    Example:
        >>> step_fields(0, 0.0, {"obs_hash": "o", "state_hash": "s"},
        ...             {"action_canonical": "up", "obs_hash": "p"}, True)["next_obs_key"]
        'p'
    """
    return {
        "t": t,
        "reward": float(reward),
        "obs_key": before["obs_hash"],
        "state_key": before["state_hash"],
        "action_key": after["action_canonical"],
        "valid": valid,
        "next_obs_key": after["obs_hash"],
    }


def step_record(
    group: Any,
    traj: Any,
    t: int,
    reward: float,
    before: StepInfo,
    after: StepInfo,
    valid: bool,
) -> StepRecord:
    """The estimator row of one step: its group and trajectory ids, then :func:`step_fields`.

    Example:
        >>> step_record(0, 1, 0, 0.0, {"obs_hash": "o", "state_hash": "s"},
        ...             {"action_canonical": "up", "obs_hash": "p"}, True)["traj"]
        1
    """
    return {"group": group, "traj": traj, **step_fields(t, reward, before, after, valid)}


@dataclass(frozen=True)
class EpisodeSlot:
    """One episode to play: its task, the env's reset seed and its ids in the step records."""

    task_id: str
    seed: int
    group: Any = None
    traj: Any = None


@dataclass(frozen=True)
class EpisodeOutcome:
    """A finished episode's figures, named as ``episodes.csv`` names them (``return`` there is
    ``episode_return`` here, a Python keyword otherwise): the harness writes its row, training
    reads its success and counts.
    """

    task_id: str
    category: str
    success: bool
    score: float
    steps: int
    episode_return: float
    invalid_actions: int  # steps whose action was not admissible (or broke the answer format)
    non_string_actions: int  # of those, answers that were not text at all (counted apart)

    def row(self, seed: int) -> EpisodeRow:
        """The episode's row of ``episodes.csv`` for evaluation seed ``seed`` (plus
        ``non_string_actions``, which the journal keeps and the summary totals).

        Example:
            >>> EpisodeOutcome("t", "easy", True, 1.0, 3, 10.0, 0, 0).row(7)["return"]
            10.0
        """
        return {
            "task_id": self.task_id,
            "category": self.category,
            "seed": seed,
            "success": self.success,
            "score": self.score,
            "steps": self.steps,
            "return": round(self.episode_return, 10),
            "invalid_actions": self.invalid_actions,
            "non_string_actions": self.non_string_actions,
        }


@dataclass
class Episode:
    """An episode in progress (or finished): what the agent sees now and the running counts."""

    slot: EpisodeSlot
    observation: Any
    info: StepInfo
    history: list[HistoryStep] = field(default_factory=list)
    steps: int = 0
    total: float = 0.0
    invalid: int = 0
    non_string: int = 0
    done: bool = False

    def outcome(self) -> EpisodeOutcome:
        """The episode's figures (meaningful once ``done``)."""
        return EpisodeOutcome(
            task_id=self.slot.task_id,
            category=str(self.info["category"]),
            success=bool(self.info["won"]),
            score=float(self.info["score"]),
            steps=self.steps,
            episode_return=self.total,
            invalid_actions=self.invalid,
            non_string_actions=self.non_string,
        )


class Lockstep:
    """Episodes of an env pool stepped in lockstep: every live episode takes one step per call.

    ``episodes[i]`` plays on env ``i`` of the pool; ``live`` lists the episodes still running, in
    pool order, which is the order :meth:`step` takes actions in and writes rows in. ``rows``
    holds the step records (:class:`~agentbench_rl.core.batch.StepColumns`: turned into columns
    in blocks while the episodes play, so the estimator's batch is built without a pass over
    the rows); ``records`` reads them back as dicts. ``finished`` lists episode indices in the
    order they ended.
    """

    def __init__(self, pool: EnvPool, slots: Sequence[EpisodeSlot]) -> None:
        if pool.size != len(slots):
            raise ValueError(f"episode driver: {len(slots)} episodes for {pool.size} envs")
        self.pool = pool
        started = pool.reset([(slot.task_id, slot.seed) for slot in slots])
        self.episodes = [
            Episode(slot, observation, info)
            for slot, (observation, info) in zip(slots, started, strict=True)
        ]
        self.live = list(range(len(slots)))
        self.rows = StepColumns()
        self._row_episode: list[int] = []  # which episode wrote each row
        self.finished: list[int] = []
        self.t = 0

    @classmethod
    def of_envs(cls, envs: Sequence[TextAgentEnv[Any]], slots: Sequence[EpisodeSlot]) -> Lockstep:
        """Episodes on envs of this process (env ``i`` plays ``slots[i]``)."""
        return cls(LocalEnvPool.of(envs), slots)

    def step(
        self, actions: Sequence[object], format_kept: Sequence[bool] | None = None
    ) -> list[int]:
        """Step every live episode with its action (``actions[k]`` for ``live[k]``); returns
        the indices in ``rows`` of the rows written, in ``live`` order."""
        if len(actions) != len(self.live):
            raise ValueError(f"episode driver: {len(actions)} actions for {len(self.live)} live")
        kept = list(format_kept) if format_kept is not None else [True] * len(actions)
        results = self.pool.step(self.live, [env_action(action) for action in actions])
        first_row = len(self.rows)
        records, still_live = [], []
        for k, index in enumerate(self.live):
            observation, reward, terminated, truncated, info = results[k]
            episode = self.episodes[index]
            valid = action_valid(actions[k], info, kept[k])
            self._row_episode.append(index)
            records.append(
                step_record(
                    episode.slot.group,
                    episode.slot.traj,
                    self.t,
                    reward,
                    episode.info,
                    info,
                    valid,
                )
            )
            episode.history.append(history_step(episode.observation, info))
            episode.steps += 1
            episode.total += float(reward)
            episode.invalid += not valid
            episode.non_string += not isinstance(actions[k], str)
            episode.observation, episode.info = observation, info
            if terminated or truncated:
                episode.done = True
                self.finished.append(index)
            else:
                still_live.append(index)
        self.rows.extend(records)
        self.live = still_live
        self.t += 1
        if not self.live:
            self._mark_success()
        return list(range(first_row, len(self.rows)))

    @property
    def records(self) -> list[StepRecord]:
        """The step records written so far, as new dicts (:meth:`StepColumns.records`)."""
        return self.rows.records()

    def _mark_success(self) -> None:
        success = np.array([bool(episode.info["won"]) for episode in self.episodes])
        self.rows.set_column("success", success[np.array(self._row_episode, dtype=np.int64)])


class AgentRows:
    """Single-step agents, one per row, as one :class:`~agentbench_rl.agents.base.BatchAgent`:
    row ``i`` is played by ``agents[i]``, which is told ``begin_episode`` and asked ``act`` (with
    the history when its ``reads_history`` is true) exactly as when it plays alone.

    Example:
        >>> from agentbench_rl.agents.simple import RandomAgent
        >>> rows = AgentRows([RandomAgent(), RandomAgent()])
        >>> rows.begin_episodes([None, None], [3, 3])  # type: ignore[list-item]
        >>> info = {"admissible_actions": ["up", "down", "left"]}
        >>> a, b = rows.act_batch(["", ""], [info, info], rows=[0, 1], histories=[[], []])
        >>> a == b  # equal seeds, equal draws: a row never sees its neighbours
        True
    """

    def __init__(self, agents: Sequence[Agent]) -> None:
        self.agents = list(agents)
        self.capabilities = [Capabilities.of(agent) for agent in self.agents]
        self.name = self.agents[0].name if self.agents else ""

    def begin_episodes(self, envs: Sequence[TextAgentEnv[Any]], seeds: Sequence[int]) -> None:
        """Tell agent ``i`` its episode: ``begin_episode(envs[i], seeds[i])``."""
        if len(envs) > len(self.agents):
            raise ValueError(f"episode driver: {len(envs)} episodes for {len(self.agents)} agents")
        for agent, env, seed in zip(self.agents, envs, seeds, strict=False):
            agent.begin_episode(env, seed)

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[Any]:
        """Every row's agent answers its own observation."""
        actions: list[Any] = []
        for row, observation, info, history in zip(
            rows, observations, infos, histories, strict=True
        ):
            agent = self.agents[row]
            if self.capabilities[row].reads_history:
                actions.append(agent.act(observation, info, history))  # type: ignore[call-arg]
            else:
                actions.append(agent.act(observation, info))
        return actions


def as_batch_agent(agents: BatchAgent | Sequence[Agent]) -> BatchAgent:
    """A batched agent as it is, or single-step agents (one per row) as :class:`AgentRows`."""
    if isinstance(agents, Sequence):
        return AgentRows(agents)
    return agents


def drive(
    lock: Lockstep,
    agent: BatchAgent,
    on_step: Callable[[list[int], list[int]], None] | None = None,
) -> Iterator[int]:
    """Step every live episode of ``lock`` with ``agent`` until all end (the agent was told
    ``begin_episodes``); yields each episode's index as it ends, so a caller can record
    finished episodes while the others still run. One ``act_batch`` call per step answers
    every live episode; validity follows :func:`action_valid` with the answer format of the
    row's agent. ``on_step(episodes, rows)``, when given, runs after each step with the
    episodes that acted and the indices in ``lock.rows`` of the rows they wrote, in the same
    order (the fidelity bench checks its replays and reseeds its agent there).
    """
    if isinstance(agent, AgentRows):
        capabilities = agent.capabilities
    else:  # one batched agent plays every row
        capabilities = [Capabilities.of(agent)] * len(lock.episodes)
    while lock.live:
        live = list(lock.live)
        episodes = [lock.episodes[index] for index in live]
        actions = agent.act_batch(
            [episode.observation for episode in episodes],
            [episode.info for episode in episodes],
            rows=live,
            histories=[episode.history for episode in episodes],
        )
        if len(actions) != len(live):
            raise ValueError(
                f"agent '{agent.name}': act_batch answered {len(actions)} rows for {len(live)}"
            )
        kept = [format_kept(capabilities[i], a) for i, a in zip(live, actions, strict=True)]
        ended = len(lock.finished)
        rows = lock.step(actions, kept)
        if on_step is not None:
            on_step(live, rows)
        yield from lock.finished[ended:]


def play(
    envs: Sequence[TextAgentEnv[Any]],
    slots: Sequence[EpisodeSlot],
    agents: BatchAgent | Sequence[Agent],
    agent_seeds: Sequence[int],
) -> Lockstep:
    """Play one episode per env until all end; returns the finished driver.

    ``agents`` is either one single-step agent per env (agent ``i`` is told
    ``begin_episode(envs[i], agent_seeds[i])`` after the reset and answers
    ``act(observation, info)``, or ``act(observation, info, history)`` when its
    ``reads_history`` is true: the driver's history, not its own) or one batched agent (told
    ``begin_episodes(envs, agent_seeds)``, asked ``act_batch`` once per step for every live
    episode). See :func:`drive`.

    Example:
        >>> from agentbench_rl.agents.simple import ExpertAgent
        >>> from agentbench_rl.envs import make
        >>> slot = EpisodeSlot("test-0003", episode_seed(0, "test-0003"))
        >>> lock = play([make("sokoban", split="test")], [slot], [ExpertAgent()], [slot.seed])
        >>> lock.episodes[0].outcome().success
        True
    """
    lock = Lockstep.of_envs(envs, slots)
    batch = as_batch_agent(agents)
    batch.begin_episodes(envs, agent_seeds)
    for _ in drive(lock, batch):
        pass
    return lock
