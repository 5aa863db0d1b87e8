package contract

// SwitchPath returns the parameter path of a stage's toggles, without a trailing
// slash: "/runstwice/<stage>/toggles".
func SwitchPath(stage string) string { return "/runstwice/" + stage + "/toggles" }

// SwitchParameter returns the parameter that switches jobType in stage.
func SwitchParameter(stage, jobType string) string { return SwitchPath(stage) + "/" + jobType }
