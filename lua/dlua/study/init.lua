--- dlua.study: tuning studies (playbook section 2): scientific hyperparameters
-- (what is compared), nuisance ones (searched anew for each scientific value,
-- with the same nuisance points for every value), fixed ones; trials run as
-- dlua subprocesses in their own run directories, several at a time, and the
-- study is resumable and shareable between agents.
--
--   return dl.study{
--     name = "bn-virtual-batch", goal = "does the ghost batch size matter once lr is re-tuned?",
--     experiment = "fashion_mnist.lua",            -- relative to this file
--     scientific = {virtual_batch = {16, 64}},
--     nuisance = {lr = dl.search.log_uniform(1e-3, 1), momentum = dl.search.uniform(0.8, 0.99)},
--     fixed = {batch_size = 128}, trials = 8, algorithm = "quasirandom", seed = 7,
--     objective = {metric = "valid/accuracy", mode = "max"}, parallel = 2, seeds = 3,
--   }
--
-- Files in the study directory <root>/<name>/ (docs/studies.md):
--   study.json      the study as data (spaces, roles, seed, objective), fingerprinted
--   journal.jsonl   append-only events (claim, renew, suggest, finish, complete,
--                   rung, promote, torn), written under an fcntl lock on journal.lock
--   gp/<tag>.json   the bayes GP's last fit per scientific value (warm start)
--   trials.csv      one row per finished trial, rewritten after every trial
--   results.json    the per-scientific-value report of the last completion
--   <trial id>/     each trial's run directory (dl.train's files, trial.log, exit)
-- and one row per completed study in <root>/studies.csv.
--
-- The package, by concern: spec (dl.study{...} and its checks), plan (the trials
-- and their command lines), journal (the shared event log), launch (a trial as a
-- process), agent (claiming and running trials), results (what trials measured),
-- run (study:run, `dlua STUDYFILE`, `dlua agent`), dryrun (the check before the
-- first trial), site (the study file and line errors name), warm (enqueue and
-- warm_start), prune (median and asha pruning), importance (per-hyperparameter
-- importance in the results); common holds helpers.
-- Trials are started by launch.launch unless study:run / study:main get another
-- launch function (dlua.study.ranks passes its pool's).
local util = require "dlua.util"
local common = require "dlua.study.common"
local journal = require "dlua.study.journal"
local launch = require "dlua.study.launch"
local spec = require "dlua.study.spec"
local site = require "dlua.study.site"
local results = require "dlua.study.results"
local run = require "dlua.study.run"

local M = {}

-- the methods that run a study (spec.lua cannot require run.lua, which uses it)
local Study = spec.Study
Study.run, Study.main, Study.help, Study.prepare = run.run, run.main, run.help, run.prepare
-- a study's methods refuse extra arguments and wrong types (declared once)
util.strict_table("Study:", Study, true, {
  run = {"table?"}, main = {"table?", "string?", "table?"}, help = {"string?"}, prepare = {"string", "integer?"},
  plan = {"integer?"}, trial_hparams = {"table"}, trial_args = {"table", "table?"}, command = {"table"},
})

M.study, M.is_study, M.from_record = spec.study, spec.is_study, spec.from_record
--- load_file(path) -> what a study file returns, the file known to its dl.study call (site.load_file).
M.load_file = site.load_file
M.launch = launch.launch
M.run_metric, M.results, M.format_results, M.complete = results.run_metric, results.results,
  results.format_results, results.complete
M.agent_main = run.agent_main
M._replay = journal.replay
M.format_value = common.format_value
--- The process id of this dlua (util.getpid).
M.getpid = util.getpid
--- Shell quoting for one argument (util.shell_quote).
M.shell_quote = util.shell_quote

return M
