"""REINFORCE with a learned baseline (after the PyTorch reinforcement-learning examples) on a
small grid world implemented in NumPy.

The agent starts in a random cell of a 5x5 grid and must reach the goal cell; the floor is
slippery (with probability ``slip`` the move goes in a random direction). Each step costs 0.05
and reaching the goal pays 1. The policy and the value baseline share one small MLP body; the
loss is the policy-gradient term with normalized discounted returns minus the baseline, a value
regression term and an entropy bonus.

Evaluation is deterministic: the greedy policy (argmax of the logits) is run from every start
cell with the environment's own NumPy random stream seeded, and the program reports the
"regret": the mean number of steps over the shortest path, with episodes cut off at the step
limit.

    python reinforce.py --episodes 300
"""

import argparse
import os
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

SavedAction = namedtuple("SavedAction", ["log_prob", "value", "entropy"])

MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])  # up, down, left, right


class GridWorld:
    def __init__(self, size=5, goal=(2, 4), slip=0.1, max_steps=20, seed=0):
        self.size = size
        self.goal = np.array(goal)
        self.slip = slip
        self.max_steps = max_steps
        self.rng = np.random.default_rng(seed)
        self.pos = None
        self.t = 0

    def observation(self):
        obs = np.zeros(2 * self.size + 2, dtype=np.float32)
        obs[self.pos[0]] = 1.0
        obs[self.size + self.pos[1]] = 1.0
        obs[2 * self.size :] = (self.goal - self.pos) / self.size
        return obs

    def reset(self, start=None):
        if start is None:
            while True:
                start = self.rng.integers(0, self.size, size=2)
                if not np.array_equal(start, self.goal):
                    break
        self.pos = np.array(start)
        self.t = 0
        return self.observation()

    def step(self, action):
        if self.rng.random() < self.slip:
            action = self.rng.integers(0, 4)
        self.pos = np.clip(self.pos + MOVES[action], 0, self.size - 1)
        self.t += 1
        done = bool(np.array_equal(self.pos, self.goal))
        reward = 1.0 if done else -0.05
        truncated = self.t >= self.max_steps
        return self.observation(), reward, done, truncated


class Policy(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.affine1 = nn.Linear(obs_dim, hidden)
        self.affine2 = nn.Linear(hidden, hidden)
        self.action_head = nn.Linear(hidden, n_actions)
        self.value_head = nn.Linear(hidden, 1)

    def forward(self, x):
        x = F.relu(self.affine1(x))
        x = F.relu(self.affine2(x))
        return self.action_head(x), self.value_head(x).squeeze(-1)


def select_action(model, state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    logits, value = model(state)
    probs = F.softmax(logits, dim=-1)
    m = Categorical(probs)
    action = m.sample()
    return action.item(), SavedAction(m.log_prob(action), value, m.entropy())


def discounted_returns(rewards, gamma):
    returns = []
    R = 0.0
    for r in reversed(rewards):
        R = r + gamma * R
        returns.insert(0, R)
    return torch.tensor(returns)


def finish_batch(model, optimizer, episodes, args):
    """One update from a batch of episodes, each a list of (SavedAction, reward)."""
    eps = np.finfo(np.float32).eps.item()
    returns = torch.cat([discounted_returns([r for _, r in ep], args.gamma) for ep in episodes])
    returns = (returns - returns.mean()) / (returns.std() + eps)
    saved = [s for ep in episodes for s, _ in ep]
    log_probs = torch.cat([s.log_prob for s in saved])
    values = torch.cat([s.value for s in saved])
    entropy = torch.cat([s.entropy for s in saved])
    advantage = returns - values.detach()
    policy_loss = -(log_probs * advantage).mean()
    value_loss = F.smooth_l1_loss(values, returns)
    loss = policy_loss + args.value_coef * value_loss - args.entropy_coef * entropy.mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
    optimizer.step()
    return loss.item()


@torch.inference_mode()
def evaluate(model, args):
    """Greedy policy from every start cell; returns (mean regret in steps, success rate)."""
    model.eval()
    env = GridWorld(args.size, slip=args.slip, max_steps=args.max_steps, seed=12345)
    regrets, successes, actions = [], 0, []
    for r in range(args.size):
        for c in range(args.size):
            start = np.array([r, c])
            if np.array_equal(start, env.goal):
                continue
            state = env.reset(start)
            shortest = int(np.abs(env.goal - start).sum())
            for _ in range(args.max_steps):
                logits, _ = model(torch.from_numpy(state).unsqueeze(0))
                action = torch.argmax(logits, dim=1).item()
                actions.append(action)
                state, _, done, truncated = env.step(action)
                if done or truncated:
                    break
            successes += int(done)
            regrets.append((env.t if done else args.max_steps + 1) - shortest)
    counts = F.one_hot(torch.tensor(actions), num_classes=len(MOVES)).sum(dim=0)
    print(f"greedy actions (up, down, left, right): {counts.tolist()}")
    model.train()
    return float(np.mean(regrets)), successes / len(regrets)


def main(argv=None):
    parser = argparse.ArgumentParser(description="REINFORCE with baseline on a grid world")
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--batch-episodes", type=int, default=4, help="episodes per update")
    parser.add_argument("--eval-interval", type=int, default=50)
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--value-coef", type=float, default=0.5)
    parser.add_argument("--entropy-coef", type=float, default=0.01)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--slip", type=float, default=0.1)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=543)
    parser.add_argument("--init-from", default=None)
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    env = GridWorld(args.size, slip=args.slip, max_steps=args.max_steps, seed=args.seed)
    model = Policy(env.reset().shape[0], len(MOVES))
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)
    start_episode = 0
    if args.init_from:
        checkpoint = torch.load(args.init_from)
        model.load_state_dict(checkpoint["model"])
        start_episode = checkpoint["episode"]

    history = {"train_loss": [], "episode_return": [], "regret": [], "success": []}
    if args.evaluate:
        regret, success = evaluate(model, args)
        history["regret"].append(regret)
        history["success"].append(success)
        return history

    os.makedirs(args.save_dir, exist_ok=True)
    running_reward = None
    batch = []
    for i_episode in range(start_episode + 1, start_episode + args.episodes + 1):
        state = env.reset()
        episode = []
        while True:
            action, saved_action = select_action(model, state)
            state, reward, done, truncated = env.step(action)
            episode.append((saved_action, reward))
            if done or truncated:
                break
        ep_return = sum(r for _, r in episode)
        if running_reward is None:
            running_reward = ep_return
        running_reward = 0.05 * ep_return + (1 - 0.05) * running_reward
        history["episode_return"].append(ep_return)
        batch.append(episode)
        if len(batch) == args.batch_episodes:
            history["train_loss"].append(finish_batch(model, optimizer, batch, args))
            scheduler.step()
            batch = []
        if i_episode % args.eval_interval == 0:
            regret, success = evaluate(model, args)
            history["regret"].append(regret)
            history["success"].append(success)
            print(
                f"Episode {i_episode}\tLast return: {ep_return:.2f}\t"
                f"Average return: {running_reward:.2f}\tregret {regret:.2f} success {success:.2f}"
            )

    path = os.path.join(args.save_dir, "policy.pt")
    torch.save(
        {
            "episode": start_episode + args.episodes,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
        },
        path,
    )
    reloaded = Policy(env.reset().shape[0], len(MOVES))
    reloaded.load_state_dict(torch.load(path)["model"])
    history["final_regret"], history["final_success"] = evaluate(reloaded, args)
    return history


if __name__ == "__main__":
    main()
