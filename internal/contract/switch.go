package contract

// SwitchPath returns the path of a stage's toggle parameters, without a trailing
// slash: "/runstwice/<stage>/toggles".
func SwitchPath(stage string) string { return "/runstwice/" + stage + "/toggles" }

// SwitchParameter returns the toggle parameter of jobType's kill switch in stage.
func SwitchParameter(stage, jobType string) string { return SwitchPath(stage) + "/" + jobType }
