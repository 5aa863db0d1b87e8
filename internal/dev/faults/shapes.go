package faults

import (
	"encoding/json"
	"net/http"
)

// errorShape is an error answer as a service sends it on the wire.
type errorShape struct {
	status int
	header map[string]string
	body   map[string]string
}

// write sends the answer.
func (e errorShape) write(w http.ResponseWriter) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("X-Amzn-Requestid", "runstwice-faults")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e.body)
}

// Content types of the AWS JSON protocols.
const (
	json10   = "application/x-amz-json-1.0"
	json11   = "application/x-amz-json-1.1"
	restJSON = "application/json"
)

// dynamoThrottles are the two throttling errors DynamoDB answers: the
// table's (or index's) throughput, and the account's or the control
// plane's request rate. The SDK retries both as throttles.
var dynamoThrottles = []string{
	"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
	"com.amazonaws.dynamodb.v20120810#ThrottlingException",
}

// throttle returns the throttling error service answers; pick chooses
// between equivalent shapes (DynamoDB has two).
func throttle(service string, pick int) errorShape {
	const msg = "Rate exceeded"
	switch service {
	case "dynamodb":
		return errorShape{http.StatusBadRequest, map[string]string{"Content-Type": json10},
			map[string]string{"__type": dynamoThrottles[pick%len(dynamoThrottles)], "message": msg}}
	case "sqs":
		// The JSON protocol's error, with the header that carries the
		// query protocol's code (SQS is query-compatible).
		return errorShape{http.StatusBadRequest, map[string]string{"Content-Type": json10, "X-Amzn-Query-Error": "ThrottlingException;Sender"},
			map[string]string{"__type": "com.amazon.coral.availability#ThrottlingException", "message": msg}}
	case "ssm":
		return errorShape{http.StatusBadRequest, map[string]string{"Content-Type": json11},
			map[string]string{"__type": "ThrottlingException", "message": msg}}
	case "ses":
		// SES v2 is REST-JSON: the code is in X-Amzn-ErrorType.
		return errorShape{http.StatusTooManyRequests, map[string]string{"Content-Type": restJSON, "X-Amzn-Errortype": "TooManyRequestsException"},
			map[string]string{"message": "Too many requests"}}
	}
	return errorShape{http.StatusBadRequest, map[string]string{"Content-Type": json11},
		map[string]string{"__type": "ThrottlingException", "message": msg}}
}

// serverError returns the 500 or 503 service answers.
func serverError(service string, status int) errorShape {
	code, msg := "InternalServerError", "Internal server error"
	if status == http.StatusServiceUnavailable {
		code, msg = "ServiceUnavailable", "Service unavailable"
	}
	switch service {
	case "dynamodb":
		if status == http.StatusInternalServerError {
			code = "com.amazonaws.dynamodb.v20120810#InternalServerError"
		}
		return errorShape{status, map[string]string{"Content-Type": json10}, map[string]string{"__type": code, "message": msg}}
	case "sqs":
		query := "InternalError;Receiver"
		if status == http.StatusServiceUnavailable {
			query = "ServiceUnavailable;Receiver"
		}
		return errorShape{status, map[string]string{"Content-Type": json10, "X-Amzn-Query-Error": query},
			map[string]string{"__type": "com.amazon.coral.service#" + code, "message": msg}}
	case "ses":
		return errorShape{status, map[string]string{"Content-Type": restJSON, "X-Amzn-Errortype": code},
			map[string]string{"message": msg}}
	}
	return errorShape{status, map[string]string{"Content-Type": json11}, map[string]string{"__type": code, "message": msg}}
}
