package scalemodel

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxItemSize is DynamoDB's limit of one item: 400 KB, names and values.
const MaxItemSize = 400 * 1024

// ItemSize is the size of item as DynamoDB counts it against MaxItemSize:
// each attribute's name (UTF-8 bytes) and value (ValueSize).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize is the size of one attribute value as DynamoDB counts it: a
// string's or binary's bytes; a number's significant digits, two a byte,
// and one byte more; a set's elements; a boolean or null one byte; a list
// or map three bytes, one byte per element and its elements (a map's
// names too).
func ValueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is the size of number s: its significant digits (leading and
// trailing zeros trimmed), two a byte rounded up, and one byte.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Trim(strings.Replace(mant, ".", "", 1), "0")
	return (len(digits)+1)/2 + 1
}
