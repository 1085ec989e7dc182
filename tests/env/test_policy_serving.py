"""Policy serving (RLlib 1.13's PolicyClient / PolicyServerInput): a trainer learns from
envs that ask it for actions over HTTP (remote inference) or act with a local copy of its
policy and report their batches (local inference); messages are JSON, never pickles."""

from __future__ import annotations

import copy
import pickle
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.env.policy_client import PolicyClient
from corral.env.policy_server_input import PolicyServerInput
from corral.env.serving_wire import (
    batch_from_wire,
    batch_to_wire,
    dumps,
    loads,
    metrics_from_wire,
    metrics_to_wire,
)
from corral.evaluation.metrics import RolloutMetrics
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.error import EnvError

CARTPOLE = gym.make("CartPole-v1")


def _serving_trainer(cls, **config):
    return cls(
        env=None,
        config={
            "num_workers": 0,
            "observation_space": CARTPOLE.observation_space,
            "action_space": CARTPOLE.action_space,
            "input": lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, idle_timeout=0.5),
            "input_evaluation": [],
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            **config,
        },
    )


def _address(trainer) -> str:
    host, port = trainer.workers.local_worker().input_reader.server_address[:2]
    return f"http://{host}:{port}"


def _play(address: str, stop: threading.Event, logged: bool = False, seed: int = 0) -> None:
    try:
        _episodes(address, stop, logged, seed)
    except EnvError:
        if not stop.is_set():  # (the server closing under a request is expected)
            raise


def _episodes(address: str, stop: threading.Event, logged: bool, seed: int) -> None:
    _run_episodes(PolicyClient(address, inference_mode="remote"), stop, logged, seed)


def _run_episodes(client, stop: threading.Event, logged: bool = False, seed: int = 0) -> None:
    """CartPole episodes driven like RLlib's cartpole_client.py, until `stop`."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    while not stop.is_set():
        eid = client.start_episode()
        while True:
            if logged:
                action = 0
                client.log_action(eid, obs, action)
            else:
                action = client.get_action(eid, obs)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            client.log_returns(eid, reward, info={"note": "ok"})
            if terminated or truncated:
                client.end_episode(eid, obs)
                obs, _ = env.reset()
                break


def _with_clients(trainer, n: int = 1, logged: bool = False):
    stop = threading.Event()
    threads = [
        threading.Thread(target=_play, args=(_address(trainer), stop, logged, i), daemon=True)
        for i in range(n)
    ]
    for thread in threads:
        thread.start()
    return stop


def test_ppo_learns_from_clients_over_http():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50, num_sgd_iter=2)
    stop = _with_clients(trainer, n=2)
    try:
        results = [trainer.train() for _ in range(2)]
        assert results[-1]["timesteps_total"] >= 400
        # The clients' episodes are the trainer's metrics (CartPole: return = length).
        assert results[-1]["episodes_total"] > 0
        assert results[-1]["episode_reward_mean"] == pytest.approx(results[-1]["episode_len_mean"])
    finally:
        stop.set()
        trainer.stop()


def test_logged_actions_reach_an_off_policy_learner():
    trainer = _serving_trainer(
        DQNTrainer, rollout_fragment_length=20, train_batch_size=32, learning_starts=40
    )
    stop = _with_clients(trainer, logged=True)
    try:
        for _ in range(4):
            result = trainer.train()
        assert result["timesteps_total"] > 40
        reader = trainer.workers.local_worker().input_reader
        batch = reader.next()
        while not batch.count:  # (empty while no experience came within idle_timeout)
            batch = reader.next()
        assert (batch["actions"] == 0).all()  # logged as the client took them
    finally:
        stop.set()
        trainer.stop()


def test_client_errors_name_the_server_s_reason():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50)
    try:
        client = PolicyClient(_address(trainer), inference_mode="remote")
        with pytest.raises(EnvError, match="was never started"):
            client.log_returns("nope", 1.0)
        with pytest.raises(EnvError, match="unreachable"):
            PolicyClient("http://127.0.0.1:9", inference_mode="remote").start_episode()
        # Pickles are not read: the server answers 500 and runs nothing.
        request = urllib.request.Request(_address(trainer), data=b"\x80\x04K\x01.", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 500
    finally:
        trainer.stop()


def test_inference_mode_and_update_interval_are_checked():
    with pytest.raises(ValueError, match="inference_mode"):
        PolicyClient("http://127.0.0.1:1", inference_mode="elsewhere")
    with pytest.raises(ValueError, match="update_interval"):
        PolicyClient("http://127.0.0.1:1", inference_mode="local", update_interval=-1)
    with pytest.raises(ValueError, match="config_overrides"):
        PolicyClient("http://127.0.0.1:1", inference_mode="remote", config_overrides={})
    with pytest.raises(EnvError, match="unreachable"):
        PolicyClient("http://127.0.0.1:9", inference_mode="local")


def test_wire_format_round_trips_and_refuses_objects():
    message = {
        "obs": np.arange(6, dtype=np.float32).reshape(2, 3),
        "pair": (np.int64(3), 1.5),
        "by_agent": {0: np.ones(2), "b": [1, 2]},
        "none": None,
    }
    back = loads(dumps(message))
    np.testing.assert_array_equal(back["obs"], message["obs"])
    assert back["obs"].dtype == np.float32
    assert back["pair"] == (3, 1.5) and back["none"] is None
    assert set(back["by_agent"]) == {0, "b"} and back["by_agent"]["b"] == [1, 2]
    with pytest.raises(TypeError, match="Cannot send a object"):
        dumps({"x": object()})
    with pytest.raises(ValueError, match="JSON object"):
        loads(b"[1, 2]")


def _play_two_agents(address: str, stop: threading.Event) -> None:
    _play_two_agents_with(PolicyClient(address, inference_mode="remote"), stop)


def _play_two_agents_with(client, stop: threading.Event) -> None:
    envs = {a: gym.make("CartPole-v1") for a in (0, 1)}
    try:
        while not stop.is_set():
            obs = {a: env.reset()[0] for a, env in envs.items()}
            eid = client.start_episode()
            while obs:
                actions = client.get_action(eid, obs)
                rewards, dones, next_obs = {}, {}, {}
                for agent, action in actions.items():
                    o, r, terminated, truncated, _ = envs[agent].step(int(action))
                    rewards[agent], dones[agent] = r, terminated or truncated
                    if not dones[agent]:
                        next_obs[agent] = o
                dones["__all__"] = not next_obs
                client.log_returns(eid, rewards, multiagent_done_dict=dones)
                obs = next_obs
            client.end_episode(eid, {})
    except EnvError:
        if not stop.is_set():
            raise


def test_a_multi_agent_trainer_serves_each_agent_s_policy():
    space, actions = CARTPOLE.observation_space, CARTPOLE.action_space
    trainer = _serving_trainer(
        PPOTrainer,
        sgd_minibatch_size=50,
        num_sgd_iter=1,
        multiagent={
            "policies": {"p0": (None, space, actions, {}), "p1": (None, space, actions, {})},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    stop = threading.Event()
    threading.Thread(target=_play_two_agents, args=(_address(trainer), stop), daemon=True).start()
    try:
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"p0", "p1"}
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
    finally:
        stop.set()
        trainer.stop()


# -- local inference -------------------------------------------------------------------


def _recording(reader) -> list[str]:
    """The commands the server executes, in order."""
    commands: list[str] = []
    execute = reader.execute

    def recorded(message):
        commands.append(message.get("command"))
        return execute(message)

    reader.execute = recorded
    return commands


def _local_play(client, stop: threading.Event, seed: int = 0) -> threading.Thread:
    def play():
        try:
            _run_episodes(client, stop, seed=seed)
        except EnvError:
            if not stop.is_set():
                raise

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_local_inference_acts_on_the_client_and_trains_the_server():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50, num_sgd_iter=2)
    reader = trainer.workers.local_worker().input_reader
    commands = _recording(reader)
    client = PolicyClient(_address(trainer), inference_mode="local", update_interval=0.2)
    stop = threading.Event()
    try:
        server_policy = trainer.get_policy()
        client_policy = client.rollout_worker.get_policy()
        assert type(client_policy) is type(server_policy)
        initial = client_policy.get_weights()
        # Pulled when the client was built: the trainer's weights.
        assert _same_weights(initial, server_policy.get_weights())
        _local_play(client, stop)
        results = [trainer.train() for _ in range(2)]
        assert results[-1]["timesteps_total"] >= 400
        # The client's episodes are the trainer's metrics (CartPole: return = length).
        assert results[-1]["episodes_total"] > 0
        assert results[-1]["episode_reward_mean"] == pytest.approx(results[-1]["episode_len_mean"])
        trained = server_policy.get_weights()
        assert not _same_weights(trained, initial)
        # The client's next calls pull the trained weights (update_interval=0.2 s).
        deadline = time.monotonic() + 30
        while not _same_weights(client_policy.get_weights(), trained):
            assert time.monotonic() < deadline, "the client never pulled the trained weights"
            time.sleep(0.05)
        # Every action came from the client's policy: the server computed none.
        assert "GET_ACTION" not in commands and "START_EPISODE" not in commands
        assert commands[:2] == ["GET_WORKER_ARGS", "GET_WEIGHTS"]
        assert commands.count("REPORT_SAMPLES") >= 4 and commands.count("GET_WEIGHTS") >= 2
        assert reader._embedded is None  # the remote-inference sampler never started
    finally:
        stop.set()
        client.close()
        trainer.stop()
    assert not client.inference_thread.is_alive()
    with pytest.raises(EnvError, match="closed"):
        client.start_episode()


def test_local_inference_reports_its_thread_s_failure():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50)
    client = PolicyClient(_address(trainer), inference_mode="local", update_interval=None)
    trainer.stop()  # the server is gone: the client's first report fails
    with pytest.raises(EnvError, match=r"stopped: EnvError: .*unreachable \(REPORT_SAMPLES\)"):
        _run_episodes(client, threading.Event())
    assert not client.inference_thread.is_alive()
    client.close()


def _fake_server(body: bytes):
    """A server answering every request with `body` (a malicious or broken server)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _worker_args(trainer) -> dict:
    request = urllib.request.Request(
        _address(trainer), data=dumps({"command": "GET_WORKER_ARGS"}), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return loads(response.read())["worker_args"]


def _tampered(args: dict, **changes) -> dict:
    args = copy.deepcopy(args)
    policy = args["policies"]["default_policy"]
    for key, value in changes.items():
        target, _, name = key.partition("__")
        {"policy": policy, "args": args, "config": args["config"]}[target][name] = value
    return args


def _refusal(args_or_body) -> str:
    body = args_or_body if isinstance(args_or_body, bytes) else dumps({"worker_args": args_or_body})
    server = _fake_server(body)
    try:
        with pytest.raises(EnvError) as info:
            PolicyClient(f"http://127.0.0.1:{server.server_address[1]}", inference_mode="local")
        return str(info.value)
    finally:
        server.shutdown()
        server.server_close()


def test_local_inference_refuses_what_it_must_not_build():
    trainer = _serving_trainer(PPOTrainer)
    try:
        args = _worker_args(trainer)
    finally:
        trainer.stop()
    policy = args["policies"]["default_policy"]
    assert policy["algorithm"] == "PPO"
    assert policy["policy_class"] == "corral.agents.ppo.ppo_torch_policy:PPOTorchPolicy"
    assert args["code"]["input"].endswith("<lambda>")  # code travels as a name only
    # An algorithm the client has not registered.
    message = _refusal(_tampered(args, policy__algorithm="EvilAlgo"))
    assert "'EvilAlgo', which is not registered on this client" in message
    # A class that is not the registered algorithm's default policy class.
    message = _refusal(_tampered(args, policy__policy_class="os:system"))
    assert "os:system" in message and "PPOTorchPolicy" in message
    # Code smuggled into the config data.
    smuggled = _tampered(args, config__callbacks={"__class__": "os:system"})
    assert "not config data" in _refusal(smuggled)
    # A custom model the client script has not registered.
    model = {**args["config"]["model"], "custom_model": "NotRegisteredHere"}
    message = _refusal(_tampered(args, config__model=model))
    assert "ModelCatalog.register_custom_model('NotRegisteredHere'" in message
    # A custom model class (code) in the server's config.
    message = _refusal(_tampered(args, args__code={"model.custom_model": "my_module:MyNet"}))
    assert "model.custom_model = my_module:MyNet" in message
    assert "registered by name on both sides" in message
    # An exploration class named by import path (the client would import it).
    exploration = {"type": "os.path.Foo"}
    message = _refusal(_tampered(args, config__exploration_config=exploration))
    assert "'os.path.Foo' by import path" in message
    # Not corral's description, and replies that are not JSON (a pickle, garbage).
    assert "version=1" in _refusal(_tampered(args, args__version=99))
    assert "not a JSON message" in _refusal(pickle.dumps({"worker_args": args}))
    assert "not a JSON message" in _refusal(b"\x00\xff not json")


def test_the_server_refuses_malformed_reports():
    trainer = _serving_trainer(PPOTrainer)
    address = _address(trainer)

    def report(samples, metrics=()) -> str:
        message = {"command": "REPORT_SAMPLES", "samples": samples, "metrics": list(metrics)}
        request = urllib.request.Request(address, data=dumps(message), method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=30)
        return info.value.read().decode()

    good = {
        "obs": np.zeros((3, 4), np.float32),
        "actions": np.zeros(3, np.int64),
        "rewards": np.ones(3, np.float32),
        "dones": np.zeros(3, bool),
    }
    try:
        assert "lacks columns ['rewards']" in report(
            batch_to_wire(SampleBatch({k: v for k, v in good.items() if k != "rewards"}))
        )
        bad_obs = SampleBatch({**good, "obs": np.zeros((3, 5), np.float32)})
        assert "shape (5,)" in report(batch_to_wire(bad_obs))
        multi = MultiAgentBatch({"default_policy": SampleBatch(good)}, 3)
        assert "takes a SampleBatch" in report(batch_to_wire(multi))
        assert "numeric or boolean array" in report(
            {"type": "SampleBatch", "columns": {"obs": [["x"]]}}
        )
        assert "episode_reward must be a number" in report(
            batch_to_wire(SampleBatch(good)), [{"episode_length": 3, "episode_reward": "x"}]
        )
        assert trainer.workers.local_worker().input_reader.samples_queue.empty()
    finally:
        trainer.stop()


def test_batches_and_metrics_cross_the_wire_as_data():
    batch = SampleBatch(
        {"obs": np.arange(6, dtype=np.float32).reshape(3, 2), "dones": np.array([0, 0, 1], bool)}
    )
    back = batch_from_wire(loads(dumps({"b": batch_to_wire(batch)}))["b"])
    assert isinstance(back, SampleBatch) and back["obs"].dtype == np.float32
    np.testing.assert_array_equal(back["dones"], batch["dones"])
    multi = batch_from_wire(
        loads(dumps({"b": batch_to_wire(MultiAgentBatch({"p0": batch}, 7))}))["b"]
    )
    assert isinstance(multi, MultiAgentBatch) and multi.count == 7
    assert multi.policy_batches["p0"].count == 3
    # A nested column (Dict observations with `_disable_preprocessor_api`) keeps its form.
    nested = SampleBatch(
        {
            "obs": {"pos": np.zeros((3, 2), np.float32), "ids": (np.arange(3), np.ones(3))},
            "dones": np.array([0, 0, 1], bool),
        }
    )
    back = batch_from_wire(loads(dumps({"b": batch_to_wire(nested)}))["b"])
    assert set(back["obs"]) == {"pos", "ids"} and isinstance(back["obs"]["ids"], tuple)
    np.testing.assert_array_equal(back["obs"]["ids"][0], np.arange(3))
    assert back["obs"]["pos"].dtype == np.float32 and back.count == 3
    metric = RolloutMetrics(
        5,
        2.5,
        {(0, "p0"): 2.5},
        {"m": 1.0},
        {"mean_inference_ms": 0.1},
        {"h": [1, 2]},
        {"img": object()},
    )
    (back_metric,) = metrics_from_wire(loads(dumps({"m": metrics_to_wire([metric])}))["m"])
    assert back_metric.agent_rewards == {(0, "p0"): 2.5} and back_metric.media == {}
    assert back_metric._replace(media=metric.media) == metric


def test_local_inference_serves_a_multi_agent_trainer():
    space, actions = CARTPOLE.observation_space, CARTPOLE.action_space

    def mapping(agent_id, episode, worker, **kw):
        return f"p{agent_id}"

    trainer = _serving_trainer(
        PPOTrainer,
        sgd_minibatch_size=50,
        num_sgd_iter=1,
        multiagent={
            "policies": {
                "p0": (None, space, actions, {}),
                "p1": (None, space, actions, {"model": {"fcnet_hiddens": [16]}}),
            },
            "policy_mapping_fn": mapping,
        },
    )
    commands = _recording(trainer.workers.local_worker().input_reader)
    stop = threading.Event()
    client = None
    try:
        # The mapping function is code: the client script must give it.
        with pytest.raises(EnvError, match=r"multiagent\.policy_mapping_fn = .*mapping"):
            PolicyClient(_address(trainer), inference_mode="local")
        client = PolicyClient(
            _address(trainer),
            inference_mode="local",
            config_overrides={"multiagent": {"policy_mapping_fn": mapping}},
        )
        # p1's own model config reached the client (its weights fit).
        assert client.rollout_worker.get_policy("p1").get_weights().keys() == (
            trainer.get_policy("p1").get_weights().keys()
        )
        threading.Thread(target=_play_two_agents_with, args=(client, stop), daemon=True).start()
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"p0", "p1"}
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
        assert "GET_ACTION" not in commands
    finally:
        stop.set()
        if client is not None:
            client.close()
        trainer.stop()
