"""Batch, episode and metric key constants shared by envs, rollout, rewards and algorithms.

Algorithm code uses these names instead of string literals (house style rule 3).
"""

# Episode side channels (SingleAgentEpisode.custom_data / last info).
EPISODE_RECORD = "episode_record"  # info key of the last step: EpisodeRecord.to_dict()
RISK_REWARDS = "risk_rewards"  # custom_data: per-step risk stream, np.ndarray (T,)
REWARD_VECTOR = "reward_vector"  # custom_data: {layer: np.ndarray (T,)} settled, normalised layer values
ROOT_CAUSE = "root_cause"  # custom_data: int root-cause label of a failed episode (-1 if none)
POLICY_VERSION = "policy_version"  # custom_data: learner update count when the episode was sampled

# EpisodeRecord.context keys of per-call outcomes (agentic_ray.rewards.call_outcomes): a domain whose tools detect
# or rank lists what each call returned beside the truth, for the detection and ranking reward layers.
CONTEXT_DETECTION_CALLS = "detection_calls"  # list of DetectionOutcome.to_context() dicts
CONTEXT_RANKING_CALLS = "ranking_calls"  # list of RankingOutcome.to_context() dicts
CONTEXT_RECORD_CALLS = "record_calls"  # list of RecordOutcome.to_context() dicts
# EpisodeRecord.context key of the customer's key facts and the agent's uses and asks of them (the L4 memory layer,
# Entity Recall@5, forgetting): agentic_ray.memory.memory_episode.MemoryEpisode.to_context().
CONTEXT_MEMORY_FACTS = "memory_facts"
ENV_CONTEXT_KEYS: tuple[str, ...] = (CONTEXT_MEMORY_FACTS,)
"""Episode-record context the env writes itself for any domain (the key facts of tasks that have them,
``Task.key_facts``, and their uses), beside the domain's ``reward_context``: a layer reading only these is not off
for a domain; on an episode without key facts it has nothing to score."""

# Step info keys.
STEP_TRACE = "trace"
MASK_REASONS = "mask_reasons"
BACKEND_ERRORS = "backend_errors"  # reset info: list of typed backend failures (world or fault push)
ENTITIES_PAST_CAP = "entities_past_cap"  # step info (when any), EpisodeRecord: {node type: count}
METRIC_ENTITIES_PAST_CAP = "agentic/entities_past_cap"  # EnvRunner metric: entities past a cap per episode

# AAAC train-batch columns written by the two-critic advantage connector (besides Columns.ADVANTAGES and
# Columns.VALUE_TARGETS, which hold the combined advantage and the reward critic's TD(λ) targets).
RISK_VALUE_TARGETS = "risk_value_targets"  # (N,) TD(λ) targets of the risk critic
REWARD_ADVANTAGES = "reward_advantages"  # (N,) unstandardised TD(λ) advantages of the reward stream
RISK_ADVANTAGES = "risk_advantages"  # (N,) unstandardised TD(λ) advantages of the risk stream
TD_LAMBDA = "td_lambda"  # (N,) λ chosen for the episode each row belongs to

# PPO-Lagrangian train-batch columns (cost critic), learner state and metrics.
COST_ADVANTAGES = "cost_advantages"  # (N,) GAE advantages of the cost stream (−risk), centred
COST_VALUE_TARGETS = "cost_value_targets"  # (N,) GAE value targets of the cost critic
PPO_LAG_MULTIPLIERS = "ppo_lagrangian_multipliers"  # learner state: {module_id: Lagrange multiplier}
PPO_LAG_MULTIPLIER = "lagrange_multiplier"
PPO_LAG_EPISODE_COST = "episode_cost_mean"  # the batch's mean cost per episode (the dual ascent's J_c)
PPO_LAG_VF_LOSS_COST = "vf_loss_cost"

# AAAC learner state and metrics.
AAAC_NUM_UPDATES = "aaac_num_updates"  # learner state: Learner.update() calls so far (critic warm-up's unit)
AAAC_NUM_POLICY_STEPS = "aaac_num_policy_steps"  # learner state: policy optimisation steps (β schedule's t)
AAAC_VALUE_NORMALIZERS = (
    "aaac_value_normalizers"  # learner state: {module_id: [reward, risk] normaliser states}
)
AAAC_REFERENCE_POLICY = "aaac_reference_policy"  # learner state: frozen π_ref module states of the anchor KL
AAAC_POLICY_LOSS = "policy_loss"
AAAC_VF_LOSS_REWARD = "vf_loss_reward"
AAAC_VF_LOSS_RISK = "vf_loss_risk"
AAAC_BETA = "beta"
AAAC_KL = "mean_kl"
AAAC_ANCHOR_KL = "anchor_kl"
AAAC_ENTROPY = "entropy"
AAAC_LAMBDA_MEAN = "lambda_mean"
AAAC_IS_WEIGHT_MEAN = "is_weight_mean"
AAAC_RATIO_MAX = "ratio_max"
AAAC_ADV_REWARD_MEAN = "adv_reward_mean"
AAAC_ADV_RISK_MEAN = "adv_risk_mean"
# Per learner update, over the whole batch (TwoCriticAdvantages); "risk rows" have a negative risk reward.
AAAC_RISK_ROW_SHARE = "risk_row_share"
AAAC_ADV_RISK_ON_RISK_ROWS = "adv_risk_on_risk_rows"  # raw risk advantage there (stream units)
AAAC_ADV_ON_RISK_ROWS = "adv_on_risk_rows"  # the policy's mixed, standardised advantage there
AAAC_VF_LOSS_RISK_ON_RISK_ROWS = "vf_loss_risk_on_risk_rows"  # risk critic's squared error there
AAAC_ADV_REWARD_STD = "adv_reward_std"
AAAC_ADV_RISK_STD = "adv_risk_std"
AAAC_GRAD_NORM_PREFIX = "grad_norm_"  # + optimizer name: global grad norm before clipping
# The multimodal encoder's per-modality gates (issue 30): forward_train's (3,) means in MODALITY_KINDS order (NaN
# for a modality no node revealed), logged by the learner as gate_image, gate_text, gate_struct.
MODALITY_GATE_MEANS = "modality_gate_means"
MODALITY_KINDS = ("image", "text", "struct")
GATE_PREFIX = "gate_"
GATE_WARN_BELOW = 0.1  # a modality whose mean gate stays below this is reported as unused (its encoder)

# Reward pipeline (agentic_ray/rewards, agentic_ray/rollout).
REWARD_VECTOR_RAW = "reward_vector_raw"  # custom_data: {layer: np.ndarray (T,)} settled raw layer values
REWARD_PROVENANCE = "reward_provenance"  # custom_data: {layer: {scorer, version, latency_s, attempts}}
REWARD_LEDGER_ID = "reward_ledger_id"  # custom_data: the episode's key in the reward ledger
# custom_data: {"checksum": str, "num_steps": int}, the runner's seal of the reward and risk streams it wrote
REWARD_SEAL = "reward_seal"
# Info key of the last step in blocking mode: the per-layer results scored inside step().
REWARD_RESULTS = "reward_results"

# Reward-pool metrics logged by the RewardAwareEnvRunner (under env_runners/ in results).
METRIC_REWARD_PENDING = "reward_pool_pending"
METRIC_REWARD_SETTLED = "reward_pool_settled"
METRIC_REWARD_MISSING = "reward_pool_missing"
METRIC_REWARD_DROPPED = "reward_pool_dropped"
METRIC_REWARD_HELD = "reward_pool_held"
METRIC_REWARD_WAIT_S = "reward_pool_wait_s"
METRIC_REWARD_STALENESS = "reward_pool_staleness"
METRIC_REWARD_STALENESS_MAX = "reward_pool_staleness_max"
METRIC_REWARD_DUPLICATES = "reward_pool_duplicates"
METRIC_REWARD_CANCELLED = "reward_pool_cancelled_calls"
AAAC_REFLECTION_LOSS = "reflection_loss"
AAAC_REFLECTION_ACCURACY = "reflection_accuracy"
METRIC_REWARD_LAYER_PREFIX = "reward_layer/"  # + layer name: raw per-episode layer value (EnvRunner metric)

# Tune sweeps (agentic_ray/sweeps): prefixes of the metrics a trial reports.
SWEEP_VALIDATION_PREFIX = (
    "val/"  # + validation metric (completion, high_risk_share, ...): what sweeps rank on
)
SWEEP_TRAIN_PREFIX = "train/"  # + training statistic (return): logged, never an objective
METRIC_REWARD_LAYER_NORM_PREFIX = "reward_layer_norm/"  # + layer name: normalised per-episode layer value
