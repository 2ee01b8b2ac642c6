-- recipes/study.lua -- a quasi-random study (playbook section 2: scientific, nuisance
-- and fixed hyperparameters), ending with the report and the diagnosis.
-- The roles come from a study file (returning dl.study{...}; the same as `dlua
-- STUDYFILE`, for study files kept as data) or from the command line:
--   scientific:  compared; one group of trials per value (--scientific name=v1,v2)
--   nuisance:    searched anew for every scientific value, the same quasi-random points
--                for each (--nuisance name=log:A:B | uniform:A:B | int:A:B | choice:v1,v2,
--                with @parent=value for a conditional one)
--   fixed:       held constant, the caveat on the conclusion (--fixed name=value)
--   budget:      --trials per scientific value, --steps per trial (one value for all)
--   metric:      --objective valid/accuracy[:max|:min] (the best eval, retrospectively)
--
--   dlua study STUDYFILE [study flags]
--   dlua study [EXPERIMENT] --name NAME --scientific optimizer=nesterov,adam \
--        --nuisance lr=log:1e-3:0.5 --nuisance momentum=uniform:0.8:0.99@optimizer=nesterov \
--        --fixed width=64 --trials 8 --steps 60 [--goal TEXT] [--objective M[:mode]]
--        [--algorithm A, a row of dl.search.algorithm_names()] [--search-seed N] [--no-report] [study flags]
-- Study flags: --out DIR --trials N --parallel P --steps N --threads N --count N --lease S
-- --create --resume --quiet (docs/api/study.md). Under mpirun the trials are spread
-- over the ranks; rank 0 writes the report. The library runs it all (dlua.cli.study).
local args = {}
for i = 1, #(arg or {}) do args[i] = arg[i] end
require("dlua.cli.study").main(args)
