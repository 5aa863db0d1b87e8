package stack

import (
	"strings"
	"testing"
)

// The users directory: with UsersTableName the stack creates no users table
// and the e-mail function reads, and may only touch, the application's
// table and its digest index; without it, the stack's own.
func TestUsersDirectoryIsTheNamedTable(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	if c := tmpl.Resources["UsersTable"].Condition; c != "CreateUsersTable" {
		t.Fatalf("UsersTable's condition %q; want CreateUsersTable (no table when UsersTableName names one)", c)
	}
	st, err := New(tmpl, Options{Params: map[string]string{"UsersTableName": "app-users"}, Region: "eu-west-1", AccountID: "111122223333"})
	if err != nil {
		t.Fatal(err)
	}
	if own, err := st.condition("CreateUsersTable"); err != nil || own {
		t.Fatalf("CreateUsersTable = %v, %v with UsersTableName set; want false", own, err)
	}
	fn, err := tmpl.FunctionProperties("EmailFunction")
	if err != nil {
		t.Fatal(err)
	}
	env := asMap(asMap(fn["Environment"])["Variables"])
	if got, err := st.ResolveString(env["USERS_TABLE"]); err != nil || got != "app-users" {
		t.Fatalf("USERS_TABLE = %q, %v; want the named table", got, err)
	}
	want := map[string]string{
		"Users":             "arn:aws:dynamodb:eu-west-1:111122223333:table/app-users",
		"WeeklyDigestUsers": "arn:aws:dynamodb:eu-west-1:111122223333:table/app-users/index/digest",
	}
	for _, p := range list(tmpl.Resources["EmailFunctionRole"].Properties["Policies"]) {
		for _, s := range list(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
			sid := str(asMap(s)["Sid"])
			w, ok := want[sid]
			if !ok {
				continue
			}
			got, err := st.ResolveString(asMap(s)["Resource"])
			if err != nil || !strings.HasSuffix(got, strings.TrimPrefix(w, "arn:aws")) {
				t.Fatalf("statement %s on %q, %v; want %s", sid, got, err, w)
			}
			delete(want, sid)
		}
	}
	if len(want) > 0 {
		t.Fatalf("no statements %v in EmailFunctionRole", want)
	}
}

// Every mail type that reads the users directory has an alarm on the share
// of its jobs that found no user: JobsNoop with reason user-not-found over
// JobsSucceeded, above one half.
func TestUsersUnknownAlarms(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	for _, typ := range []string{"email.partner-verification.v1", "email.password-reset.v1", "email.welcome.v1", "email.partner-digest.v1"} {
		found := false
		for _, id := range tmpl.IDs("AWS::CloudWatch::Alarm") {
			p := tmpl.Resources[id].Properties
			var noop, succeeded bool
			for _, m := range list(p["Metrics"]) {
				ms := asMap(asMap(asMap(m)["MetricStat"])["Metric"])
				dims := map[string]string{}
				for _, d := range list(ms["Dimensions"]) {
					dims[str(asMap(d)["Name"])] = str(asMap(d)["Value"])
				}
				if dims["type"] != typ || str(ms["Namespace"]) != "runstwice" {
					continue
				}
				switch str(ms["MetricName"]) {
				case "JobsNoop":
					noop = dims["reason"] == "user-not-found"
				case "JobsSucceeded":
					succeeded = true
				}
			}
			if noop && succeeded {
				found = true
				if p["Threshold"] != 0.5 || str(p["ComparisonOperator"]) != "GreaterThanThreshold" {
					t.Errorf("%s: threshold %v %v; want more than half", id, p["Threshold"], p["ComparisonOperator"])
				}
			}
		}
		if !found {
			t.Errorf("no alarm on the share of %s jobs whose user was not found", typ)
		}
	}
}
