"""The one function that turns :class:`~agentic_ray.settings.ExperimentSettings` into an RLlib config."""

from __future__ import annotations

import logging
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.settings import ExperimentSettings


def module_spec(settings: ExperimentSettings, env: AgentTaskEnv | None = None) -> RLModuleSpec:
    """The AAAC RLModule spec for the settings' env (spaces, graph spec, action layout, model sizes)."""
    from agentic_ray.models.aaac_rl_module import AAACRLModule

    env = env or AgentTaskEnv(settings.env)
    return RLModuleSpec(
        module_class=AAACRLModule,
        observation_space=env.observation_space,
        action_space=env.action_space,
        model_config={
            "graph_spec": env.graph_spec,
            "action_layout": env.layout,
            **settings.model.model_dump(),
        },
    )


def build_algo_config(settings: ExperimentSettings) -> AlgorithmConfig:
    """AAAC (or a PPO baseline, for side-by-side runs) on the agent env with the AAAC module, callbacks and reward
    pool. The PPO baselines keep their own algorithm class (``algo_class`` of their config); with a reward pool they
    run as ``RewardPoolPPO``, whose learner is still the config's (risk-folded or Lagrangian)."""
    from agentic_ray.ray_notices import drop_known_ray_notices
    from agentic_ray.rollout.episode_callbacks import AgenticEpisodeCallbacks
    from agentic_ray.rollout.whole_episode_env_runner import WholeEpisodeEnvRunner

    drop_known_ray_notices()
    s = settings
    env = AgentTaskEnv(s.env)
    cfg: Any
    if s.algo.name == "aaac":
        from agentic_ray.algorithms.aaac import AAACConfig

        cfg = AAACConfig()
        if s.rewards is not None:
            from agentic_ray.algorithms.aaac.aaac import RewardPoolAAAC

            cfg.algo_class = RewardPoolAAAC
    else:
        cfg = _ppo_config(s.algo.name)
        if s.rewards is not None:
            from agentic_ray.rollout.reward_pool_wiring import RewardPoolPPO

            cfg.algo_class = RewardPoolPPO
    cfg.environment(AgentTaskEnv, env_config=s.env.model_dump(), clip_actions=True)
    cfg.env_runners(
        num_env_runners=s.ray.num_env_runners,
        num_envs_per_env_runner=s.ray.num_envs_per_env_runner,
        sample_timeout_s=s.ray.sample_timeout_s,
        batch_mode="complete_episodes",
        # RLlib's own complete_episodes sampling drops the episodes still running at the end of each sample() call
        # (about half the sampled steps here, and the longest episodes); see whole_episode_env_runner.py.
        env_runner_cls=WholeEpisodeEnvRunner,
    )
    cfg.rl_module(rl_module_spec=module_spec(s, env))
    # `algo.training` holds algorithm-specific settings; an experiment written for AAAC (w_reward, beta_0, ...)
    # run with `--set algo.name=ppo` keeps the ones PPO has and says which it leaves out (PPOConfig.training
    # raised a TypeError on the first AAAC key: the README's `--set algo.name=ppo` command failed).
    # AAAC itself still refuses an unknown key (a typo stays an error).
    known = {k: v for k, v in s.algo.training.items() if s.algo.name == "aaac" or hasattr(cfg, k)}
    if unknown := sorted(set(s.algo.training) - set(known)):
        logging.getLogger(__name__).warning(
            "algo.training settings %s do not apply to %s and are left out", ", ".join(unknown), s.algo.name
        )
    cfg.training(
        lr=s.algo.lr,
        gamma=s.algo.gamma,
        train_batch_size_per_learner=s.algo.train_batch_size,
        minibatch_size=s.algo.minibatch_size,
        num_epochs=s.algo.num_epochs,
        entropy_coeff=s.algo.entropy_coeff,
        **known,
    )
    cfg.learners(num_gpus_per_learner=s.ray.num_gpus_per_learner)
    cfg.callbacks(AgenticEpisodeCallbacks)
    # log_sys_usage samples CPU/GPU load through GPUtil (not a dependency: RLlib warns "Install gputil" at every
    # build); nothing here reads those metrics.
    cfg.debugging(seed=s.seed, log_sys_usage=False)
    if s.rewards is not None:
        from agentic_ray.rollout.reward_pool_wiring import wire_reward_pool

        wire_reward_pool(cfg, s.rewards)
    env.close()
    return cfg


def _ppo_config(name: str) -> AlgorithmConfig:
    """The config of a PPO baseline: plain PPO, PPO on the risk-folded reward, or PPO-Lagrangian."""
    if name == "ppo_risk_folded":
        from agentic_ray.algorithms.ppo_risk_folded import RiskFoldedPPOConfig

        return RiskFoldedPPOConfig()
    if name == "ppo_lagrangian":
        from agentic_ray.algorithms.ppo_lagrangian import PPOLagrangianConfig

        return PPOLagrangianConfig()
    from ray.rllib.algorithms.ppo import PPOConfig

    return PPOConfig()


def current_module(algo: Any, module_id: str = "default_policy") -> Any:
    """The algorithm's current (learner-side, full) RLModule, e.g. for BC or ``ModulePolicy``.

    With a local learner (``num_learners=0``) this is the learner's live module (no copy: training it trains the
    algorithm; call it under ``torch.no_grad`` when evaluating). With remote learners, a fresh module is built
    from the config's spec and loaded with the learner group's current weights.
    """
    lg = algo.learner_group
    if lg.is_local:
        results = lg.foreach_learner(lambda learner: learner.module[module_id].unwrapped())
        return next(iter(results)).get()
    spec = algo.config.get_multi_rl_module_spec().rl_module_specs[module_id]
    module = spec.build()
    module.set_state(lg.get_weights(module_ids=[module_id])[module_id])
    return module
