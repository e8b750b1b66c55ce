"""The policy's batched acting: choose-mode scores, hidden states from the same forward,
determinism, the tiny model's tokenizer, behaviour cloning and the batched rollout driver."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)  # tiny models: one thread beats two on a shared machine

from agentbench_rl.envs import make  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.models.policy import (  # noqa: E402
    Policy,
    choice_logprobs,
    distinct_rows,
    equal_length_groups,
    pack,
    response_logprobs,
    score_choices,
)
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny, build_tokenizer  # noqa: E402
from agentbench_rl.prompting import PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.batched import rollout_groups  # noqa: E402
from agentbench_rl.rollout.group import GroupEnv, rollout_group  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402
from agentbench_rl.rollout.workers import LocalEnvPool  # noqa: E402
from agentbench_rl.train.bc import ExpertRow, behaviour_cloning, expert_rows, target_ids  # noqa: E402
from agentbench_rl.train.config import BCConfig  # noqa: E402

MOVES = ["up", "down", "left", "right"]
SMALL = TinyModelConfig(
    hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=4
)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    return build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"), prompt, SMALL.tokenizer_episodes, 0
        ),
        SMALL,
        0,
    )


def make_policy(tiny: tuple[Any, Any], mode: str = "choose", **kwargs: Any) -> Policy:
    model, tokenizer = tiny
    prompt = PromptConfig(history_observations=False, mode=mode, instruction="")  # type: ignore[arg-type]
    kwargs.setdefault("hidden_layer", 1)
    return Policy(model, tokenizer, prompt, **kwargs)


def sokoban_prompts(count: int) -> list[str]:
    env = make("sokoban", split="test")
    prompts = []
    for index in range(count):
        observation, info = env.reset(options={"task_id": f"test-{index:04d}"})
        prompts.append(
            build_prompt(
                "sokoban",
                observation,
                [],
                info["admissible_actions"],
                PromptConfig(history_observations=False, mode="choose", instruction=""),
            )
        )
    return prompts


def test_tokenizer_keeps_grid_cells_apart() -> None:
    tokenizer = build_tokenizer(iter(["##__ push push push\n#P_X√#"] * 20), 300)
    pieces = [tokenizer.decode([i]) for i in tokenizer("#__P√#")["input_ids"]]
    assert pieces == ["#", "_", "_", "P", "√", "#"]
    assert tokenizer.decode(tokenizer("push")["input_ids"]) == "push"
    assert len(tokenizer("push")["input_ids"]) == 1  # lower-case words merge
    tags = [tokenizer.decode([i]) for i in tokenizer("<action>up</action>")["input_ids"]]
    assert tags == ["<action>", "u", "p", "</action>"]  # tags are one token each


def test_choose_scores_match_a_full_forward_and_hidden_is_the_prompt_forwards(
    tiny: tuple[Any, Any],
) -> None:
    policy = make_policy(tiny)
    prompts = sokoban_prompts(3)
    admissible = [MOVES, MOVES[:2], ["left"]]
    out = policy.act(prompts, admissible, torch.Generator().manual_seed(0), capture_hidden=True)
    assert [r.startswith("<action>") and r.endswith("</action>") for r in out.responses] == [
        True
    ] * 3
    assert out.responses[2] == "<action>left</action>"  # the only admissible action
    # each action's score by a separate full forward; the stored log-prob is the drawn
    # action's under the softmax of the row's scores
    assert out.choices is not None and out.chosen is not None
    for row in range(3):
        scores = full_forward_scores(policy, out.prompt_ids[row], admissible[row])
        expected = torch.log_softmax(torch.tensor(scores, dtype=torch.float64), 0)
        assert out.choices[row][out.chosen[row]] == out.response_ids[row]
        assert np.allclose(out.logprobs[row], [expected[out.chosen[row]]], atol=1e-5)
    # the hidden state is the last layer at the last prompt token (a separate forward here)
    model = policy.model
    with torch.no_grad():
        ids = torch.tensor([out.prompt_ids[0]])
        states = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert out.hidden is not None and out.hidden.shape == (3, SMALL.hidden_size)
    assert np.allclose(out.hidden[0], states[-1][0, -1].numpy(), atol=1e-5)


def test_cpu_scores_prompts_of_unequal_lengths_and_repeated_rows_as_each_alone(
    tiny: tuple[Any, Any],
) -> None:
    """On the CPU rows go in groups of equal length and a repeated row is scored once; every
    score and hidden state is still the row's own (a separate plain forward each), pairs in
    row order, each row's in action order."""
    policy = make_policy(tiny)
    base = policy.encode_prompt(sokoban_prompts(1)[0])
    lengths = [40, 300, 40, 900, 300, 300, 900]
    prompt_ids = [(base * 20)[:length] for length in lengths]
    admissible = [MOVES, ["left"], MOVES[:3], MOVES[1:], MOVES[:2], ["left"], MOVES]
    # rows 5 and 1 repeat each other; row 6 has row 3's prompt but other actions
    assert distinct_rows(prompt_ids, [[[len(a)]] for a in admissible]) == (
        [0, 1, 2, 3, 4, 6],
        [0, 1, 2, 3, 4, 1, 5],
    )
    assert equal_length_groups(lengths[:5]) == [[0, 2], [1, 4], [3]]  # the paths under test
    choices = [[policy.encode_choice(a) for a in actions] for actions in admissible]
    with torch.no_grad():
        scored = score_choices(policy.model, prompt_ids, choices, policy.pad_id, 1.0, True)
    expected_rows = [row for row, actions in enumerate(admissible) for _ in actions]
    assert scored.pair_rows.tolist() == expected_rows
    assert scored.pair_columns.tolist() == [
        k for actions in admissible for k in range(len(actions))
    ]
    expected = [
        score
        for row, ids in enumerate(prompt_ids)
        for score in full_forward_scores(policy, ids, admissible[row])
    ]
    np.testing.assert_allclose(scored.scores.numpy(), expected, atol=1e-4)
    assert scored.last_prompt_hidden is not None
    for row, ids in enumerate(prompt_ids):
        with torch.no_grad():
            states = policy.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        for layer, state in zip(scored.last_prompt_hidden, states.hidden_states, strict=True):
            np.testing.assert_allclose(layer[row].numpy(), state[0, -1].numpy(), atol=1e-5)


def test_a_repeated_row_gets_its_own_gradient(tiny: tuple[Any, Any]) -> None:
    """Scored once, a repeated row still contributes its own term: the gradient of a batch with
    a row twice is the single row's gradient doubled."""
    policy = make_policy(tiny)
    ids = policy.encode_prompt(sokoban_prompts(1)[0])
    choices = [policy.encode_choice(a) for a in MOVES]

    def gradient(rows: int) -> torch.Tensor:
        policy.model.zero_grad()
        logprobs, _ = choice_logprobs(
            policy.model, [ids] * rows, [choices] * rows, [1] * rows, policy.pad_id
        )
        logprobs.sum().backward()
        return policy.model.get_input_embeddings().weight.grad.clone()

    once, twice = gradient(1), gradient(2)
    assert once.abs().sum() > 0
    torch.testing.assert_close(twice, 2 * once)


def full_forward_scores(
    policy: Policy, prompt_ids: list[int], actions: list[str], temperature: float = 1.0
) -> list[float]:
    """Each action's summed token log-probs, one plain forward of prompt + continuation each."""
    scores = []
    for action in actions:
        packed = pack([prompt_ids], [policy.encode_choice(action)], policy.pad_id)
        with torch.no_grad():
            logprobs, _ = response_logprobs(policy.model, packed, temperature)
        scores.append(float(logprobs[0].sum()))
    return scores


def test_choose_probabilities_follow_the_scores(tiny: tuple[Any, Any]) -> None:
    # with one prompt repeated, the draw frequencies match the softmax of the action scores
    policy = make_policy(tiny, forward_batch_size=512)
    prompt = sokoban_prompts(1)[0]
    out = policy.act([prompt] * 400, [MOVES] * 400, torch.Generator().manual_seed(1))
    scores = []
    for move in MOVES:
        packed = pack([out.prompt_ids[0]], [policy.encode_choice(move)], policy.pad_id)
        with torch.no_grad():
            scores.append(float(response_logprobs(policy.model, packed)[0].sum()))
    expected = np.exp(scores) / np.exp(scores).sum()
    counts = np.array([sum(r == f"<action>{m}</action>" for r in out.responses) for m in MOVES])
    assert np.abs(counts / 400 - expected).max() < 0.08


def test_same_generator_seed_same_answers(tiny: tuple[Any, Any]) -> None:
    prompts = sokoban_prompts(4)
    for mode in ("choose", "generate"):
        policy = make_policy(tiny, mode=mode, max_new_tokens=5)
        runs = [
            policy.act(prompts, [MOVES] * 4, torch.Generator().manual_seed(7)).responses
            for _ in range(2)
        ]
        assert runs[0] == runs[1]


def test_generate_mode_logprobs_and_hidden(tiny: tuple[Any, Any]) -> None:
    policy = make_policy(tiny, mode="generate", max_new_tokens=4)
    prompts = sokoban_prompts(2)
    out = policy.act(prompts, [MOVES] * 2, torch.Generator().manual_seed(0), capture_hidden=True)
    assert all(1 <= len(ids) <= 4 for ids in out.response_ids)
    assert out.hidden is not None and out.hidden.shape == (2, SMALL.hidden_size)
    packed = pack(out.prompt_ids, out.response_ids, policy.pad_id)
    with torch.no_grad():
        full, _ = response_logprobs(policy.model, packed)
    for row in range(2):
        assert np.allclose(out.logprobs[row], full[row, : len(out.response_ids[row])], atol=1e-4)


def test_hidden_layer_out_of_range_is_refused(tiny: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="hidden_layer 9 is out of range"):
        make_policy(tiny, hidden_layer=9)


def test_behaviour_cloning_raises_the_experts_likelihood() -> None:
    prompt = PromptConfig(mode="choose", instruction="")
    texts = tokenizer_texts(
        EnvSpec(name="sokoban", split="train"), prompt, SMALL.tokenizer_episodes, 3
    )
    model, tokenizer = build_tiny(texts, SMALL, 3)
    policy = Policy(model, tokenizer, PromptConfig(mode="choose", instruction=""), hidden_layer=1)
    rows = expert_rows(EnvSpec(name="sokoban", split="train"), policy.prompt, episodes=2, seed=0)
    assert rows and all(row.action in MOVES for row in rows)
    assert target_ids(policy, "up") == tokenizer("up</action>")["input_ids"]

    def expert_logprob() -> float:
        packed = pack(
            [policy.encode_prompt(r.prompt) for r in rows],
            [target_ids(policy, r.action) for r in rows],
            policy.pad_id,
        )
        with torch.no_grad():
            logprobs, _ = response_logprobs(policy.model, packed)
        return float((logprobs * packed.response_mask).sum(dim=1).mean())

    before = expert_logprob()
    # a random model spreads its mass over the whole vocabulary: about log(1/vocab) per token
    answer_tokens = len(target_ids(policy, "up"))  # "up", "</action>"
    assert answer_tokens == 2
    assert before < answer_tokens * np.log(4 / len(tokenizer))
    stats = behaviour_cloning(
        policy, rows, BCConfig(epochs=40, learning_rate=3e-3, batch_size=4), 0, 64
    )
    after = expert_logprob()
    assert after > np.log(1 / 4)  # better than a uniform pick among the four moves
    assert stats["bc/rows"] == len(rows) and stats["bc/loss"] < 1.0


def test_choice_bc_fits_the_policys_own_probability_of_the_experts_pick() -> None:
    # With learning rate 0 the reported loss is the loss at the start: the mean over rows of
    # -log softmax(scores)[expert], each score a separate plain forward of prompt + action.
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    texts = tokenizer_texts(EnvSpec(name="sokoban", split="train"), prompt, 4, 5)
    policy = make_policy(build_tiny(texts, SMALL, 5))  # its own model: this test trains it
    prompts = sokoban_prompts(3)
    rows = [
        ExpertRow(prompts[0], "left", tuple(MOVES)),
        ExpertRow(prompts[1], "up", ("down", "up")),
        ExpertRow(prompts[2], "right", ("right",)),  # one choice: probability 1, loss 0
    ]
    stats = behaviour_cloning(
        policy, rows, BCConfig(epochs=1, learning_rate=0.0, batch_size=3, loss="choice"), 0, 2
    )
    expected = []
    for row in rows:
        scores = full_forward_scores(policy, policy.encode_prompt(row.prompt), list(row.choices))
        log_policy = torch.log_softmax(torch.tensor(scores, dtype=torch.float64), 0)
        expected.append(-float(log_policy[row.choices.index(row.action)]))
    assert expected[2] == 0.0
    assert stats["bc/loss"] == pytest.approx(np.mean(expected), abs=1e-5)
    # Trained, the expert's pick becomes the policy's most likely one on every row.
    behaviour_cloning(
        policy, rows, BCConfig(epochs=30, learning_rate=3e-3, batch_size=3, loss="choice"), 0, 8
    )
    for row in rows[:2]:
        scores = full_forward_scores(policy, policy.encode_prompt(row.prompt), list(row.choices))
        assert row.choices[int(np.argmax(scores))] == row.action


def test_choice_bc_refuses_an_expert_action_outside_the_choices(tiny: tuple[Any, Any]) -> None:
    rows = [ExpertRow(sokoban_prompts(1)[0], "jump", tuple(MOVES))]
    with pytest.raises(ValueError, match="expert's action 'jump' is not among the 4 admissible"):
        behaviour_cloning(make_policy(tiny), rows, BCConfig(loss="choice"), 0, 8)


def test_generate_mode_bc_target_ends_with_eos(tiny: tuple[Any, Any]) -> None:
    policy = make_policy(tiny, mode="generate")
    ids = target_ids(policy, "up")
    assert ids[-1] == policy.tokenizer.eos_token_id
    assert policy.tokenizer.decode(ids[:-1]) == "<think></think><action>up</action>"
    assert isinstance(ExpertRow("p", "up"), ExpertRow)


class ExpertPolicy:
    """A batch policy that answers with each env's expert move (for the driver's test)."""

    def __init__(self, envs: list[Any]) -> None:
        self.envs = envs
        self.live: list[int] = []

    def act(
        self, prompts: Any, admissible: Any, generator: Any, capture_hidden: bool = False, **_: Any
    ) -> Any:
        from agentbench_rl.models.policy import ActOutput

        actions = [f"<action>{self.envs[i].expert_action()}</action>" for i in self.live]
        n = len(prompts)
        hidden = np.ones((n, 3), dtype=np.float32) if capture_hidden else None
        return ActOutput(actions, [[1]] * n, [[2]] * n, [np.zeros(1)] * n, hidden, [True] * n)


def test_batched_driver_matches_rollout_group_records() -> None:
    tasks = ["test-0000", "test-0001"]
    pool = LocalEnvPool(EnvSpec(name="sokoban", split="test"), 4)
    expert = ExpertPolicy(pool.envs)
    original_step = pool.step

    def step(indices: Any, actions: Any) -> Any:
        return original_step(indices, actions)

    # the driver asks the policy for the live members in order: track them through reset/step
    class Tracking(LocalEnvPool):
        pass

    def act(prompts: Any, admissible: Any, generator: Any, capture_hidden: bool = False) -> Any:
        expert.live = [i for i in range(4) if not pool.envs[i].episode_over]
        return ExpertPolicy.act(expert, prompts, admissible, generator, capture_hidden)

    expert_driver = type("Driver", (), {"act": staticmethod(act)})()
    batch = rollout_groups(
        pool,
        expert_driver,
        "sokoban",
        PromptConfig(mode="choose"),
        tasks,
        group_size=2,
        seed=5,
        generator=torch.Generator(),
        capture_hidden=True,
    )
    assert all(episode.outcome.success for episode in batch.episodes)
    assert batch.hidden is not None and batch.hidden.shape == (len(batch), 3)
    step_batch = batch.step_batch(with_hidden=True)
    assert step_batch.n_groups == 2 and step_batch.n_trajs == 4
    # the same rows as rollout_group with the expert agent, group by group
    from agentbench_rl.agents.simple import ExpertAgent

    for group, task in enumerate(tasks):
        group_env = GroupEnv(EnvSpec(name="sokoban", split="test"), 2)
        reference = rollout_group(group_env, ExpertAgent(), task, seed=5)
        ours = [r for r in batch.records if r["group"] == group]
        keys = ("t", "reward", "obs_key", "state_key", "action_key", "valid", "success")
        assert sorted(tuple(r[k] for k in keys) for r in ours) == sorted(
            tuple(r[k] for k in keys) for r in reference.records
        )


def test_choose_at_temperature_two_draws_by_the_stored_logprobs(tiny: tuple[Any, Any]) -> None:
    # The temperature divides the logits once: each action's score is the sum of its tokens'
    # log-probs under logits / T (what PPO recomputes), and the draw follows softmax(score),
    # so the stored log-prob is that of the draw (dividing the score by T again would draw
    # from a flatter distribution than the one PPO trains).
    import copy

    model, tokenizer = tiny
    sharp = copy.deepcopy(model)
    with torch.no_grad():  # sharpen the random model so the actions' probabilities differ
        sharp.lm_head.weight.mul_(40.0)
    policy = make_policy((sharp, tokenizer), temperature=2.0, forward_batch_size=512)
    prompt = sokoban_prompts(1)[0]
    draws = 2000
    out = policy.act([prompt] * draws, [MOVES] * draws, torch.Generator().manual_seed(3))
    scores = []
    for move in MOVES:
        packed = pack([out.prompt_ids[0]], [policy.encode_choice(move)], policy.pad_id)
        with torch.no_grad():
            scores.append(float(response_logprobs(sharp, packed, temperature=2.0)[0].sum()))
    expected = np.exp(scores) / np.exp(scores).sum()
    for response, logprobs in zip(out.responses, out.logprobs, strict=True):
        move = MOVES.index(response.removeprefix("<action>").removesuffix("</action>"))
        assert float(logprobs[0]) == pytest.approx(np.log(expected[move]), abs=1e-4)
    twice = np.exp(np.array(scores) / 2) / np.exp(np.array(scores) / 2).sum()
    assert np.abs(expected - twice).max() > 0.1  # the test can tell the two apart
    counts = np.array([sum(r == f"<action>{m}</action>" for r in out.responses) for m in MOVES])
    assert np.abs(counts / draws - expected).max() < 0.04


def test_training_log_probs_are_the_drawn_actions_and_keep_mass_on_actions(
    tiny: tuple[Any, Any],
) -> None:
    from agentbench_rl.train.ppo import row_logprobs

    # at the sampling weights, training recomputes the stored log-prob (PPO ratio 1) and the
    # entropy of the softmax over the row's admissible actions
    policy = make_policy(tiny, temperature=2.0)
    pool = LocalEnvPool(EnvSpec(name="sokoban", split="train"), 4)
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    rollout = rollout_groups(
        pool, policy, "sokoban", prompt, ["train-1", "train-2"], 2, 0, torch.Generator(), False
    )
    rows = list(range(len(rollout)))
    logprobs, entropy, mask = row_logprobs(policy.model, rollout, rows, policy.pad_id, 2.0, True)
    assert logprobs.shape == (len(rows), 1) and bool(mask.all())
    stored = np.array([rollout.logprobs[i][0] for i in rows])
    assert np.allclose(logprobs[:, 0].detach().numpy(), stored, atol=1e-5)
    actions = [policy.tokenizer.decode(c[:1]) for c in rollout.choices[0]]
    scores = full_forward_scores(policy, rollout.prompt_ids[0], actions, temperature=2.0)
    p = np.exp(scores) / np.exp(scores).sum()
    assert entropy is not None
    assert float(entropy[0, 0].detach()) == pytest.approx(float(-(p * np.log(p)).sum()), abs=1e-5)
    # the log-probs are those of a distribution over the admissible actions: they cannot all
    # rise together (the leak that let the KL grow with the raw token log-probs)
    everything = rollout.choices[0]
    for pick in range(len(everything)):
        single, _, _ = row_logprobs(
            policy.model, replace(rollout, chosen=[pick]), [0], policy.pad_id, 2.0
        )
        assert float(single[0, 0].detach()) == pytest.approx(float(np.log(p[pick])), abs=1e-5)
    logprobs[0, 0].backward()
    grads = [q.grad for q in policy.model.parameters() if q.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    policy.model.zero_grad()


def test_choose_entropy_and_its_gradient_with_rows_of_unequal_width(
    tiny: tuple[Any, Any],
) -> None:
    # Row 0 has three admissible actions, row 1 one: row 1's padded columns must give neither
    # entropy nor a NaN gradient (a real ALFWorld batch: every row has its own count).
    model, tokenizer = tiny
    prompts = [tokenizer.encode("a b"), tokenizer.encode("c")]
    choices = [[tokenizer.encode(w) for w in ("up", "down", "left")], [tokenizer.encode("up")]]
    logprobs, entropy = choice_logprobs(
        model, prompts, choices, [1, 0], tokenizer.pad_token_id, with_entropy=True
    )
    assert entropy is not None
    probabilities = logprobs.detach().exp()
    assert float(probabilities[1]) == pytest.approx(1.0) and float(entropy[1].detach()) == 0.0
    # Row 0 by hand from its own three probabilities.
    pad = tokenizer.pad_token_id
    each = [
        float(choice_logprobs(model, prompts[:1], choices[:1], [k], pad)[0][0].detach())
        for k in range(3)
    ]
    assert float(entropy[0].detach()) == pytest.approx(-sum(np.exp(v) * v for v in each), rel=1e-5)
    model.zero_grad()
    (entropy.sum() + logprobs.sum()).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
