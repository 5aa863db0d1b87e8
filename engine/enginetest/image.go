package enginetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// Image is a JSON object as the DynamoDB stream image whose plain JSON
// (engine.ImageJSON) it is: strings as S, numbers as N with their digits,
// booleans, null, arrays as L and objects as M. A test of a DynamoDB
// Streams handler writes its records' images with it.
func Image(object []byte) (map[string]events.DynamoDBAttributeValue, error) {
	dec := json.NewDecoder(bytes.NewReader(object))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	av, err := attribute(v)
	if err != nil {
		return nil, err
	}
	return av.Map(), nil
}

func attribute(v any) (events.DynamoDBAttributeValue, error) {
	switch v := v.(type) {
	case string:
		return events.NewStringAttribute(v), nil
	case json.Number:
		return events.NewNumberAttribute(v.String()), nil
	case bool:
		return events.NewBooleanAttribute(v), nil
	case nil:
		return events.NewNullAttribute(), nil
	case []any:
		list := make([]events.DynamoDBAttributeValue, len(v))
		for i, x := range v {
			av, err := attribute(x)
			if err != nil {
				return events.DynamoDBAttributeValue{}, err
			}
			list[i] = av
		}
		return events.NewListAttribute(list), nil
	case map[string]any:
		m := make(map[string]events.DynamoDBAttributeValue, len(v))
		for k, x := range v {
			av, err := attribute(x)
			if err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("%s: %w", k, err)
			}
			m[k] = av
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, errors.New("not a JSON value")
}
